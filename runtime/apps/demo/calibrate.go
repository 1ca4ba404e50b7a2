package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/calib/calibrate"
	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/dataset/simworld"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// CalibrateOnSim sets the demo's thresholds when the models directory has
// no calibration.yaml: it renders valFrames in-distribution (clear
// outdoor) frames into o.WorkDir, runs `didoedge calibrate` on them at the
// target false-alarm rate, and writes o.WorkDir/calibration.yaml (the
// demo's levels: no pessimistic-depth criterion). It returns the file and
// the calibration result.
func CalibrateOnSim(ctx context.Context, o Options, valFrames int, targetFAR float64) (string, *calibrate.Result, error) {
	o.defaults()
	ref, err := ReadReference(o.ModelsDir)
	if err != nil {
		return "", nil, err
	}
	w, h := ref.Depth.Input.Width, ref.Depth.Input.Height
	seed := o.Seed + 1000 // other drives than the demo's camera
	// Clear outdoor drives: in-distribution frames.
	src := simworld.World{Config: sim.Config{World: sim.WorldOutdoor, Width: w, Height: h, Parallelism: 1}}
	meta, err := src.Meta(seed)
	if err != nil {
		return "", nil, err
	}
	for d, split := range dataset.AssignSplits(3) {
		n := 1
		if split == "val" {
			n = valFrames
		}
		meta.Drives = append(meta.Drives, dataset.Drive{Name: fmt.Sprintf("outdoor_drive_%04d_sync", d),
			Seed: dataset.DriveSeed(seed, d), Split: split, Count: n, Stride: 5})
	}
	data := filepath.Join(o.WorkDir, "calibration-data")
	if err := dataset.Generate(ctx, dataset.GenerateOptions{Dir: data, Meta: meta, Workers: 2}, src); err != nil {
		return "", nil, fmt.Errorf("demo calibration: %w", err)
	}
	co := o
	co.HTTP = runconfig.HTTPOff
	co.Calibration = ""
	cfg, err := Config(co, "rtsp://127.0.0.1:1/unused")
	if err != nil {
		return "", nil, err
	}
	res, err := calibrate.Run(ctx, calibrate.Options{Models: cfg.ModelsConfig(), Alerts: cfg.AlertsConfig.Config, Data: data, TargetFAR: targetFAR, Log: o.Logger})
	if err != nil {
		return "", nil, err
	}
	res.Calibration.Meta["source"] = fmt.Sprintf("didoedge demo: calibrated at start on %d rendered outdoor frames", res.Frames)
	path := filepath.Join(o.WorkDir, "calibration.yaml")
	if err := alerts.SaveCalibration(path, res.Calibration); err != nil {
		return "", nil, err
	}
	os.RemoveAll(data)
	return path, res, nil
}
