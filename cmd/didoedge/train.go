package main

import (
	"context"
	"fmt"

	"github.com/didoedge/didoedge/offline"
)

// runTrain dispatches `didoedge train depth|auxue`.
func runTrain(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("want a subcommand: depth (the reference depth network) or auxue (the AuxUE on a frozen depth model)")
	}
	switch args[0] {
	case "depth":
		return runTrainDepth(ctx, env, args[1:])
	case "auxue":
		return runTrainAuxUE(ctx, env, args[1:])
	}
	return fmt.Errorf("unknown subcommand %q (want depth or auxue)", args[0])
}

// runTrainDepth trains offline/depthnet on the simulated outdoor world and
// exports it with its IO spec.
func runTrainDepth(ctx context.Context, env *cliEnv, args []string) error {
	var f offline.DepthFlags
	fs := newFlagSet(env, "train depth")
	f.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	run, err := f.DepthRun(args, env.log)
	if err != nil {
		return err
	}
	sum, err := run.Run(ctx)
	if err != nil {
		return err
	}
	return offline.WriteSummary(f.Summary, sum, env.stdout)
}

// runTrainAuxUE trains the generalized AuxUE on the errors of a frozen depth
// model run through ONNX Runtime, on the simulated pool or a data set (a
// directory or an s3:// prefix), and exports it with its input contract.
func runTrainAuxUE(ctx context.Context, env *cliEnv, args []string) error {
	run, summary, err := parseTrainAuxUE(env, args)
	if err != nil {
		return err
	}
	if err := run.OpenData(ctx, env.store()); err != nil {
		return err
	}
	sum, err := run.Run(ctx)
	if err != nil {
		return err
	}
	return offline.WriteSummary(summary, sum, env.stdout)
}

// parseTrainAuxUE parses `train auxue`'s flags (offline.AuxFlags).
func parseTrainAuxUE(env *cliEnv, args []string) (offline.AuxRun, string, error) {
	var f offline.AuxFlags
	fs := newFlagSet(env, "train auxue")
	f.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return offline.AuxRun{}, "", err
	}
	run, err := f.AuxRun(args, env.log, env.stderr)
	return run, f.Summary, err
}
