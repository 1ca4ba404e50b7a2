package main

import (
	"bytes"
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

// inputs resolves --data (local directories or s3:// prefixes, read
// through an fs.FS) into calibration inputs.
func (d *dataFlags) inputs(ctx context.Context, env *cliEnv) ([]calibrate.Input, error) {
	var in []calibrate.Input
	for _, dir := range d.dirs {
		fsys, err := env.store().DirFS(ctx, dir)
		if err != nil {
			return nil, fmt.Errorf("--data %s: %w", dir, err)
		}
		i := calibrate.Input{Dir: dir, FS: fsys, Layout: *d.layout, KITTIDepth: *d.kittiDepth}
		if *d.kittiDepth != "" {
			if i.KITTIDepthFS, err = env.store().DirFS(ctx, *d.kittiDepth); err != nil {
				return nil, fmt.Errorf("--kitti-depth %s: %w", *d.kittiDepth, err)
			}
		}
		in = append(in, i)
	}
	return in, nil
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
	inputs, err := data.inputs(ctx, env)
	if err != nil {
		return err
	}
	res, err := calibrate.Run(ctx, calibrate.Options{Config: cfg, Inputs: inputs, Split: *data.split, TargetFAR: *far, Force: *force,
		Coverage: *coverage, MaxFrames: *data.maxFrames, Log: env.log})
	if err != nil {
		return err
	}
	return writeCalibration(ctx, env, *out, res)
}

// writeCalibration writes the calibration YAML to out (a file or an
// s3:// object) and prints the summary.
func writeCalibration(ctx context.Context, env *cliEnv, out string, res *calibrate.Result) error {
	var buf bytes.Buffer
	if err := alerts.WriteCalibration(&buf, res.Calibration); err != nil {
		return fmt.Errorf("%s: %w", out, err)
	}
	if err := env.store().WriteFile(ctx, out, buf.Bytes()); err != nil {
		return fmt.Errorf("write calibration: %w", err)
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
	inputs, err := data.inputs(ctx, env)
	if err != nil {
		return err
	}
	sum, err := calibrate.Shard(ctx, calibrate.ShardOptions{Config: cfg, Inputs: inputs, Split: *data.split,
		MaxFrames: *data.maxFrames, Index: *index, Count: *count, Log: env.log})
	if err != nil {
		return err
	}
	path := calibrate.SummaryPath(*out, *index)
	var buf bytes.Buffer
	if err := sum.Write(&buf); err != nil {
		return fmt.Errorf("calibration summary %s: %w", path, err)
	}
	if err := env.store().WriteFile(ctx, path, buf.Bytes()); err != nil {
		return fmt.Errorf("calibration summary: %w", err)
	}
	fmt.Fprintf(env.stdout, "shard %d of %d: %d of %d frames, %d pixels (%d with ground truth); wrote %s\n",
		*index, *count, sum.Frames, sum.Listing.Frames, sum.Pixels, sum.GTPixels, path)
	return nil
}

// runCalibrateMerge merges shard summaries into the calibration file.
func runCalibrateMerge(ctx context.Context, env *cliEnv, args []string) error {
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
	files, err := env.store().Expand(ctx, fs.Args(), ".json")
	if err != nil {
		return fmt.Errorf("calibration summary: %w", err)
	}
	var sums []calibrate.Named
	for _, f := range files {
		data, err := env.store().ReadFile(ctx, f)
		if err != nil {
			return fmt.Errorf("calibration summary: %w", err)
		}
		s, err := calibrate.ReadSummary(bytes.NewReader(data), f)
		if err != nil {
			return err
		}
		sums = append(sums, calibrate.Named{Name: f, Summary: s})
	}
	res, err := calibrate.Merge(sums, calibrate.MergeOptions{TargetFAR: *far, Coverage: *coverage, Force: *force, Log: env.log})
	if err != nil {
		return err
	}
	return writeCalibration(ctx, env, *out, res)
}
