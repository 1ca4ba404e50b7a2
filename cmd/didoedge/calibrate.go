package main

import (
	"context"
	"errors"

	"github.com/didoedge/didoedge/calib/calibrate"
	"github.com/didoedge/didoedge/internal/shard"
	"github.com/didoedge/didoedge/runtime/apps/demo"
)

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
	var data calibrate.DataFlags
	var models demo.ModelFlags
	var th calibrate.ThresholdFlags
	fs := newFlagSet(env, "calibrate")
	data.AddFlags(fs)
	models.AddFlags(fs)
	th.AddFlags(fs)
	out := fs.String("out", "", "calibration file to write (YAML)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(data.Dirs) == 0 || *out == "" {
		return errors.New("--data DIR and --out FILE are required")
	}
	cfg, cleanup, err := models.RunConfig()
	defer cleanup()
	if err != nil {
		return err
	}
	inputs, err := data.Inputs(ctx, env.store())
	if err != nil {
		return err
	}
	res, err := calibrate.Run(ctx, calibrate.Options{Models: cfg.ModelsConfig(), Alerts: cfg.AlertsConfig.Config, Inputs: inputs, Split: data.Split, TargetFAR: th.TargetFAR, Force: th.Force,
		Coverage: th.Coverage, MaxFrames: data.MaxFrames, Log: env.log})
	if err != nil {
		return err
	}
	return calibrate.WriteCalibration(ctx, env.store(), *out, res, env.stdout)
}

// runCalibrateShard writes one shard's summary.
func runCalibrateShard(ctx context.Context, env *cliEnv, args []string) error {
	var data calibrate.DataFlags
	var models demo.ModelFlags
	var f calibrate.ShardFlags
	fs := newFlagSet(env, "calibrate shard")
	data.AddFlags(fs)
	models.AddFlags(fs)
	f.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(data.Dirs) == 0 || f.Out == "" {
		return errors.New("--data DIR and --out FILE are required")
	}
	if err := shard.FromEnv(&f.Index, &f.Count); err != nil {
		return err
	}
	cfg, cleanup, err := models.RunConfig()
	defer cleanup()
	if err != nil {
		return err
	}
	inputs, err := data.Inputs(ctx, env.store())
	if err != nil {
		return err
	}
	sum, err := calibrate.Shard(ctx, calibrate.ShardOptions{Models: cfg.ModelsConfig(), Alerts: cfg.AlertsConfig.Config, Inputs: inputs, Split: data.Split,
		MaxFrames: data.MaxFrames, Index: f.Index, Count: f.Count, Log: env.log})
	if err != nil {
		return err
	}
	return f.Write(ctx, env.store(), sum, env.stdout)
}

// runCalibrateMerge merges shard summaries into the calibration file.
func runCalibrateMerge(ctx context.Context, env *cliEnv, args []string) error {
	var th calibrate.ThresholdFlags
	fs := newFlagSet(env, "calibrate merge")
	th.AddFlags(fs)
	out := fs.String("out", "", "calibration file to write (YAML)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() == 0 {
		return errors.New("usage: didoedge calibrate merge --out FILE [--target-far F] [--coverage C] SUMMARY|DIR...")
	}
	sums, err := calibrate.ReadSummaries(ctx, env.store(), fs.Args())
	if err != nil {
		return err
	}
	res, err := calibrate.Merge(sums, calibrate.MergeOptions{TargetFAR: th.TargetFAR, Coverage: th.Coverage, Force: th.Force, Log: env.log})
	if err != nil {
		return err
	}
	return calibrate.WriteCalibration(ctx, env.store(), *out, res, env.stdout)
}
