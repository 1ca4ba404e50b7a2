package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/calib/calibrate"
	"github.com/didoedge/didoedge/runtime/apps/demo"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// runCalibrate writes the alerts calibration file from in-distribution
// validation frames.
func runCalibrate(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "calibrate")
	data := fs.String("data", "", "data set directory: sim render layout, real KITTI (with --split FILE) or NYU")
	layout := fs.String("layout", "auto", "layout of --data: auto, sim, kitti, nyu")
	kittiDepth := fs.String("kitti-depth", "", "KITTI: root of the annotated depth (default: --data)")
	depth := fs.String("depth", "", "depth model (without --config: overrides --models; any ONNX depth model with an IO spec)")
	depthSpec := fs.String("depth-spec", "", "IO spec of --depth (default: its path with .yaml)")
	aux := fs.String("auxue", "", "AuxUE model made by train auxue for --depth")
	auxSpec := fs.String("auxue-spec", "", "IO spec of --auxue (default: its path with .yaml)")
	far := fs.Float64("target-far", 0.01, "per-pixel false-alarm rate on in-distribution frames")
	out := fs.String("out", "", "calibration file to write (YAML)")
	cfgPath := fs.String("config", "", "runtime config giving models and zones (default: the demo's, with --models)")
	models := fs.String("models", "models", "reference models directory (without --config)")
	split := fs.String("split", "val", "split of the data set: a name (train, val, test, all) or a split file")
	coverage := fs.Float64("coverage", 0.9, "nominal coverage of the Laplace interval")
	maxFrames := fs.Int("max-frames", 0, "use at most this many frames (0: all)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *data == "" || *out == "" {
		return errors.New("--data DIR and --out FILE are required")
	}
	var cfg *runconfig.Config
	var err error
	switch {
	case *cfgPath != "" && (*depth != "" || *aux != ""):
		return errors.New("--config gives the models; leave --depth and --auxue out")
	case (*depth == "") != (*aux == ""):
		return errors.New("--depth and --auxue go together (a depth model and the AuxUE trained for it)")
	case *cfgPath != "":
		if cfg, err = runconfig.Load(*cfgPath); err != nil {
			return err
		}
	case *depth != "":
		ref, err := demo.ReferenceFiles(*depth, *depthSpec, *aux, *auxSpec)
		if err != nil {
			return err
		}
		tmp, err := os.MkdirTemp("", "didoedge-calibrate-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if cfg, err = demo.ConfigFor(demo.Options{WorkDir: tmp, HTTP: runconfig.HTTPOff}, ref, "rtsp://127.0.0.1:1/unused"); err != nil {
			return err
		}
	default:
		tmp, err := os.MkdirTemp("", "didoedge-calibrate-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if cfg, err = demo.Config(demo.Options{ModelsDir: *models, WorkDir: tmp, HTTP: runconfig.HTTPOff},
			"rtsp://127.0.0.1:1/unused"); err != nil {
			return err
		}
	}
	o := calibrate.Options{Config: cfg, Data: *data, Layout: *layout, KITTIDepth: *kittiDepth, Split: *split, TargetFAR: *far,
		Coverage: *coverage, MaxFrames: *maxFrames, Log: env.log}
	res, err := calibrate.Run(ctx, o)
	if err != nil {
		return err
	}
	if err := alerts.SaveCalibration(*out, res.Calibration); err != nil {
		return err
	}
	res.WriteSummary(env.stdout, o)
	fmt.Fprintf(env.stdout, "wrote %s\n", *out)
	return nil
}
