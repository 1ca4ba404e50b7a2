package offline

import (
	"context"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/internal/objstore"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// parseFlags declares a command's flags on a fresh FlagSet and parses args.
func parseFlags(t *testing.T, add func(*flag.FlagSet), args ...string) {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	add(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
}

// TestFlagsTranslation: each command's flags become its configuration,
// and a bad value is refused before anything is loaded, by an error that
// names the flag.
func TestFlagsTranslation(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewStore(func() (objstore.Config, error) { return objstore.Config{}, errors.New("no credentials") }, nil)
	depth := func(args ...string) error {
		var f DepthFlags
		parseFlags(t, f.AddFlags, args...)
		_, err := f.DepthRun(args, nil)
		return err
	}
	aux := func(args ...string) error {
		var f AuxFlags
		parseFlags(t, f.AddFlags, args...)
		_, err := f.AuxRun(args, nil, nil)
		return err
	}
	quick := func(args ...string) error {
		var f QuickFlags
		parseFlags(t, f.AddFlags, args...)
		_, err := f.Config(ctx, store, nil)
		return err
	}
	probe := func(args ...string) error {
		var f ProbeFlags
		parseFlags(t, f.AddFlags, args...)
		_, err := f.Config("m.onnx", nil)
		return err
	}
	toy := func(args ...string) error {
		var f ToyFlags
		parseFlags(t, f.AddFlags, args...)
		return f.Run(ctx, nil, nil)
	}
	for _, tc := range []struct {
		run  func(...string) error
		args string
		want string
	}{
		{depth, "--height 64", "--height 64: training renders 192-row frames"},
		{depth, "--height 64 --untrained", ""},
		{depth, "--height 64 --from-checkpoint c.ckpt", ""},
		{aux, "", ""},
		{aux, "--outlier-kinds fog", `flag -outlier-kinds: `},
		{aux, "--providers rocm", `flag -providers: `},
		{aux, "--epochs -1", "--epochs -1"},
		{aux, "--lr 0", "--lr 0"},
		{quick, "", "--data is required"},
		{quick, "--data d --providers rocm", "flag -providers: "},
		{quick, "--data s3://bucket/set", "--data s3://bucket/set: "},
		{quick, "--data d --indoor s3://bucket/in", "--indoor s3://bucket/in: "},
		{quick, "--data d --kitti-depth s3://bucket/gt", "--kitti-depth s3://bucket/gt: "},
		{quick, "--data d --indoor i", ""},
		{probe, "", ""},
		{probe, "--size 640", "flag -size: "},
		{probe, "--intrinsics 1,2", "flag -intrinsics: "},
		{probe, "--providers rocm", "flag -providers: "},
		{toy, "--seeds x", "flag -seeds: "},
		{toy, "", "--out is required"},
	} {
		err := tc.run(strings.Fields(tc.args)...)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestQuickFlagsConfig: a model's spec defaults to the file beside it;
// the data sets given are opened.
func TestQuickFlagsConfig(t *testing.T) {
	var f QuickFlags
	parseFlags(t, f.AddFlags, "--data", t.TempDir(), "--depth", "m/d.onnx", "--auxue", "m/a.onnx", "--auxue-spec", "s.yaml",
		"--providers", "cuda,cpu", "--max-frames", "7")
	cfg, err := f.Config(context.Background(), objstore.NewStore(nil, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DepthSpec != "m/d.yaml" || cfg.AuxUESpec != "s.yaml" || cfg.MaxFrames != 7 || cfg.Split != "all" || cfg.Models != "models" ||
		len(cfg.Inference.Providers) != 2 || cfg.Inference.Providers[0].Name != onnxrt.ProviderCUDA {
		t.Fatalf("config %+v", cfg)
	}
	if cfg.DataFS == nil || cfg.IndoorFS != nil || cfg.KITTIDepthFS != nil {
		t.Fatalf("data sets opened: data %v indoor %v kitti-depth %v", cfg.DataFS, cfg.IndoorFS, cfg.KITTIDepthFS)
	}
}
