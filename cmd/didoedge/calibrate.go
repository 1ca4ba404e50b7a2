package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/calib/calibrate"
	"github.com/didoedge/didoedge/runtime"
	"github.com/didoedge/didoedge/runtime/demo"
)

// runCalibrate writes the alerts calibration file from in-distribution
// validation frames.
func runCalibrate(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "calibrate")
	data := fs.String("data", "", "data set directory (calib/dataset layout, e.g. from didoedge sim render)")
	far := fs.Float64("target-far", 0.01, "per-pixel false-alarm rate on in-distribution frames")
	out := fs.String("out", "", "calibration file to write (YAML)")
	cfgPath := fs.String("config", "", "runtime config giving models and zones (default: the demo's, with --models)")
	models := fs.String("models", "models", "reference models directory (without --config)")
	split := fs.String("split", "val", "split of the data set")
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
	var cfg *runtime.Config
	var err error
	if *cfgPath != "" {
		if cfg, err = runtime.Load(*cfgPath); err != nil {
			return err
		}
	} else {
		tmp, err := os.MkdirTemp("", "didoedge-calibrate-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if cfg, err = demo.Config(demo.Options{ModelsDir: *models, WorkDir: tmp, HTTP: runtime.HTTPOff},
			"rtsp://127.0.0.1:1/unused"); err != nil {
			return err
		}
	}
	res, err := calibrate.Run(ctx, calibrate.Options{Config: cfg, Data: *data, Split: *split, TargetFAR: *far,
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
	fmt.Fprintf(w, "tau_e %.4g at target false-alarm rate %g; per zone:", c.TauE, *far)
	names := make([]string, 0, len(c.TauEZones))
	for n := range c.TauEZones {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, " %s %.4g", n, c.TauEZones[n])
	}
	fmt.Fprintf(w, "\ntau_a %.4g (b/depth)  scale_correction %.4g\n", c.TauA, c.ScaleCorrection)
	if res.NoGroundTruth {
		fmt.Fprintf(w, "no depth ground truth in %s: tau_e and tau_a are set; the Laplace coverage correction needs ground truth, scale_correction %.4g was kept from the configured calibration\n", *data, c.ScaleCorrection)
	} else {
		fmt.Fprintf(w, "Laplace interval coverage at nominal %.2f: before %.4f, after %.4f\n", *coverage, res.CoverageBefore, res.CoverageAfter)
		fmt.Fprintf(w, "UCE (m, 15 bins): before %.4f, after %.4f\n", res.UCEBefore, res.UCEAfter)
	}
	fmt.Fprintf(w, "validation frames with a zone at warn (ood_fraction): %.2f%%\n", 100*res.FrameAlarmRate)
	fmt.Fprintf(w, "wrote %s\n", *out)
	return nil
}
