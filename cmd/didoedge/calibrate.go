package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"

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
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
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
	res, err := calibrate.Run(ctx, calibrate.Options{Config: cfg, Data: *data, Layout: *layout, KITTIDepth: *kittiDepth, Split: *split, TargetFAR: *far,
		Coverage: *coverage, MaxFrames: *maxFrames, Log: env.log})
	if err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := alerts.WriteCalibration(f, res.Calibration); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	c := res.Calibration
	w := env.stdout
	fmt.Fprintf(w, "calibrated on %d %s frames of %s (%d valid pixels, %d with ground truth)\n",
		res.Frames, *split, *data, res.Pixels, res.GTPixels)
	if res.Relative {
		fmt.Fprintf(w, "relative depth model: frames aligned to their ground truth; tau_a and the interval use the relative b (b/depth); no pessimistic_depth_m criterion\n")
	}
	fmt.Fprintf(w, "tau_e %.4g at target false-alarm rate %g; per zone:", c.TauE, *far)
	names := make([]string, 0, len(c.TauEZones))
	for n := range c.TauEZones {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, " %s %.4g", n, c.TauEZones[n])
	}
	fmt.Fprintf(w, "\ntau_a %.4g (corrected b/depth); per zone:", c.TauA)
	for _, n := range names {
		fmt.Fprintf(w, " %s %.4g", n, c.TauAZones[n])
	}
	fmt.Fprintf(w, "\nscale_correction %.4g\n", c.ScaleCorrection)
	if res.NoGroundTruth {
		fmt.Fprintf(w, "no depth ground truth in %s: tau_e and tau_a are set; the Laplace coverage correction needs ground truth, scale_correction %.4g was kept from the configured calibration\n", *data, c.ScaleCorrection)
	} else {
		fmt.Fprintf(w, "Laplace interval coverage at nominal %.2f: before %.4f, after %.4f\n", *coverage, res.CoverageBefore, res.CoverageAfter)
		unit := "m"
		if res.Relative {
			unit = "relative error"
		}
		fmt.Fprintf(w, "UCE (%s, 15 bins): before %.4f, after %.4f\n", unit, res.UCEBefore, res.UCEAfter)
	}
	fmt.Fprintf(w, "validation frames with a zone at warn (ood_fraction): %.2f%%, (aleatoric_fraction): %.2f%%\n",
		100*res.FrameAlarmRate, 100*res.AleatoricAlarmRate)
	fmt.Fprintf(w, "wrote %s\n", *out)
	return nil
}
