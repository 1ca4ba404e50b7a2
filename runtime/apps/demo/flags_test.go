package demo

import (
	"flag"
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
