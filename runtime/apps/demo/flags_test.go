package demo

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlagsRefused: the model flags refuse --config with --depth/--auxue
// and a depth model without its AuxUE (and back); --cameras is bounded.
// Each error names the flags.
func TestFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", "c.yaml", "--depth", "d.onnx", "--auxue", "a.onnx"}, "--config gives the models; leave --depth and --auxue out"},
		{[]string{"--config", "c.yaml", "--auxue", "a.onnx"}, "--config gives the models"},
		{[]string{"--depth", "d.onnx"}, "--depth and --auxue go together"},
		{[]string{"--auxue", "a.onnx"}, "--depth and --auxue go together"},
		{[]string{"--depth", "missing.onnx", "--auxue", "a.onnx"}, "depth model: "},
	} {
		var f ModelFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		cfg, cleanup, err := f.RunConfig()
		cleanup()
		if cfg != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: config %v, error %v; want an error with %q", tc.args, cfg != nil, err, tc.want)
		}
	}
	for _, n := range []string{"0", "9"} {
		var f Flags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.AddFlags(fs)
		if err := fs.Parse([]string{"--cameras", n}); err != nil {
			t.Fatal(err)
		}
		if err := f.Check(); err == nil || !strings.Contains(err.Error(), "--cameras "+n+": want 1..8") {
			t.Errorf("--cameras %s: %v", n, err)
		}
	}
}

// TestModelFlagsResolveFromTheWorkingDirectory: relative --depth,
// --depth-spec and --auxue name files from the working directory (as in
// eval-quick and model run), not from the depth model's directory.
func TestModelFlagsResolveFromTheWorkingDirectory(t *testing.T) {
	models := referenceModels(t)
	work := t.TempDir()
	for _, d := range []string{"specs", "m"} {
		if err := os.Mkdir(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile := func(from, to string) {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(filepath.Join(models, "depth.yaml"), filepath.Join(work, "specs", "d.yaml"))
	copyFile(filepath.Join(models, "depth.onnx"), filepath.Join(work, "m", "depth.onnx"))
	t.Chdir(work)
	f := ModelFlags{Depth: "m/depth.onnx", DepthSpec: "specs/d.yaml", AuxUE: filepath.Join(models, "auxue.onnx")}
	cfg, cleanup, err := f.RunConfig()
	defer cleanup()
	if err != nil {
		t.Fatalf("relative --depth-spec from the working directory: %v", err)
	}
	mc := cfg.ModelsConfig()
	if want := filepath.Join(work, "specs", "d.yaml"); mc.DepthSpecFile != want {
		t.Errorf("depth spec read from %q, want %q", mc.DepthSpecFile, want)
	}
	if want := filepath.Join(work, "m", "depth.onnx"); mc.Depth != want {
		t.Errorf("depth model %q, want %q", mc.Depth, want)
	}
}
