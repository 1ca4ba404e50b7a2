package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/calib/calibrate"
	"github.com/didoedge/didoedge/internal/shard"
	"github.com/didoedge/didoedge/runtime/apps/demo"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// modelFlags are the flags that choose the config (models and zones).
type modelFlags struct {
	depth, depthSpec, aux, auxSpec, cfgPath, models *string
}

func addModelFlags(fs *flag.FlagSet) modelFlags {
	return modelFlags{
		depth:     fs.String("depth", "", "depth model (without --config: overrides --models; any ONNX depth model with an IO spec)"),
		depthSpec: fs.String("depth-spec", "", "IO spec of --depth (default: its path with .yaml)"),
		aux:       fs.String("auxue", "", "AuxUE model made by train auxue for --depth"),
		auxSpec:   fs.String("auxue-spec", "", "IO spec of --auxue (default: its path with .yaml)"),
		cfgPath:   fs.String("config", "", "runtime config giving models and zones (default: the demo's, with --models)"),
		models:    fs.String("models", "models", "reference models directory (without --config)"),
	}
}

// config loads the runtime config the flags name; cleanup removes what it
// made.
func (f modelFlags) config() (cfg *runconfig.Config, cleanup func(), err error) {
	cleanup = func() {}
	switch {
	case *f.cfgPath != "" && (*f.depth != "" || *f.aux != ""):
		return nil, cleanup, errors.New("--config gives the models; leave --depth and --auxue out")
	case (*f.depth == "") != (*f.aux == ""):
		return nil, cleanup, errors.New("--depth and --auxue go together (a depth model and the AuxUE trained for it)")
	case *f.cfgPath != "":
		cfg, err = runconfig.Load(*f.cfgPath)
		return cfg, cleanup, err
	}
	tmp, err := os.MkdirTemp("", "didoedge-calibrate-")
	if err != nil {
		return nil, cleanup, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	if *f.depth != "" {
		ref, err := demo.ReferenceFiles(*f.depth, *f.depthSpec, *f.aux, *f.auxSpec)
		if err != nil {
			return nil, cleanup, err
		}
		cfg, err = demo.ConfigFor(demo.Options{WorkDir: tmp, HTTP: runconfig.HTTPOff}, ref, "rtsp://127.0.0.1:1/unused")
		return cfg, cleanup, err
	}
	cfg, err = demo.Config(demo.Options{ModelsDir: *f.models, WorkDir: tmp, HTTP: runconfig.HTTPOff}, "rtsp://127.0.0.1:1/unused")
	return cfg, cleanup, err
}

// dataFlags are the data set flags; --data repeats.
type dataFlags struct {
	dirs                      []string
	layout, kittiDepth, split *string
	maxFrames                 *int
}

func addDataFlags(fs *flag.FlagSet) *dataFlags {
	d := &dataFlags{}
	fs.Func("data", "data set directory: sim render layout, real KITTI (with --split FILE), NYU, or a recording's export (repeat for several)", func(s string) error {
		d.dirs = append(d.dirs, s)
		return nil
	})
	d.layout = fs.String("layout", "auto", "layout of --data: auto, sim, kitti, nyu")
	d.kittiDepth = fs.String("kitti-depth", "", "KITTI: root of the annotated depth (default: --data)")
	d.split = fs.String("split", "val", "split of the data set: a name (train, val, test, all) or a split file")
	d.maxFrames = fs.Int("max-frames", 0, "use at most this many frames of each data set (0: all)")
	return d
}

func (d *dataFlags) inputs() []calibrate.Input {
	var in []calibrate.Input
	for _, dir := range d.dirs {
		in = append(in, calibrate.Input{Dir: dir, Layout: *d.layout, KITTIDepth: *d.kittiDepth})
	}
	return in
}

// runCalibrate writes the alerts calibration file from in-distribution
// validation frames; `calibrate shard` and `calibrate merge` split it.
func runCalibrate(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "shard":
			return runCalibrateShard(ctx, env, args[1:])
		case "merge":
			return runCalibrateMerge(ctx, env, args[1:])
		}
	}
	fs := newFlagSet(env, "calibrate")
	data := addDataFlags(fs)
	mf := addModelFlags(fs)
	far := fs.Float64("target-far", 0.01, "per-pixel false-alarm rate on in-distribution frames")
	force := fs.Bool("force", false, "calibrate even when the frames look out of distribution for the AuxUE (their median K/S above its validation p90)")
	out := fs.String("out", "", "calibration file to write (YAML)")
	coverage := fs.Float64("coverage", 0.9, "nominal coverage of the Laplace interval")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(data.dirs) == 0 || *out == "" {
		return errors.New("--data DIR and --out FILE are required")
	}
	cfg, cleanup, err := mf.config()
	defer cleanup()
	if err != nil {
		return err
	}
	res, err := calibrate.Run(ctx, calibrate.Options{Config: cfg, Inputs: data.inputs(), Split: *data.split, TargetFAR: *far, Force: *force,
		Coverage: *coverage, MaxFrames: *data.maxFrames, Log: env.log})
	if err != nil {
		return err
	}
	return writeCalibration(env, *out, res)
}

func writeCalibration(env *cliEnv, out string, res *calibrate.Result) error {
	if err := alerts.SaveCalibration(out, res.Calibration); err != nil {
		return err
	}
	res.WriteSummary(env.stdout)
	fmt.Fprintf(env.stdout, "wrote %s\n", out)
	return nil
}

// runCalibrateShard writes one shard's summary.
func runCalibrateShard(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "calibrate shard")
	data := addDataFlags(fs)
	mf := addModelFlags(fs)
	index := fs.Int("index", -1, "shard index (default: $"+shard.EnvIndex+", else 0)")
	count := fs.Int("count", 0, "number of shards (default: $"+shard.EnvCount+", else 1)")
	out := fs.String("out", "", "summary file to write (JSON); "+calibrate.IndexPlaceholder+" is replaced by the index")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(data.dirs) == 0 || *out == "" {
		return errors.New("--data DIR and --out FILE are required")
	}
	if err := shard.FromEnv(index, count); err != nil {
		return err
	}
	cfg, cleanup, err := mf.config()
	defer cleanup()
	if err != nil {
		return err
	}
	sum, err := calibrate.Shard(ctx, calibrate.ShardOptions{Config: cfg, Inputs: data.inputs(), Split: *data.split,
		MaxFrames: *data.maxFrames, Index: *index, Count: *count, Log: env.log})
	if err != nil {
		return err
	}
	path := calibrate.SummaryPath(*out, *index)
	if err := calibrate.WriteSummaryFile(path, sum); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "shard %d of %d: %d of %d frames, %d pixels (%d with ground truth); wrote %s\n",
		*index, *count, sum.Frames, sum.Listing.Frames, sum.Pixels, sum.GTPixels, path)
	return nil
}

// runCalibrateMerge merges shard summaries into the calibration file.
func runCalibrateMerge(_ context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "calibrate merge")
	far := fs.Float64("target-far", 0.01, "per-pixel false-alarm rate on in-distribution frames")
	force := fs.Bool("force", false, "calibrate even when the frames look out of distribution for the AuxUE (their median K/S above its validation p90)")
	coverage := fs.Float64("coverage", 0.9, "nominal coverage of the Laplace interval")
	out := fs.String("out", "", "calibration file to write (YAML)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() == 0 {
		return errors.New("usage: didoedge calibrate merge --out FILE [--target-far F] [--coverage C] SUMMARY|DIR...")
	}
	sums, err := calibrate.ReadSummaryFiles(fs.Args())
	if err != nil {
		return err
	}
	res, err := calibrate.Merge(sums, calibrate.MergeOptions{TargetFAR: *far, Coverage: *coverage, Force: *force, Log: env.log})
	if err != nil {
		return err
	}
	return writeCalibration(env, *out, res)
}
