package main

import (
	"context"
	"errors"
	"os"

	"github.com/didoedge/didoedge/internal/profiling"
	"github.com/didoedge/didoedge/pkg/nn/nnbench"
	"github.com/didoedge/didoedge/runtime/apps/bench"
)

// runBench measures the running system: `bench latency` (frame to MQTT
// subscriber, and its ratio to inference time), `bench soak` (RSS and
// goroutines over a long run), `bench scenario` (alert episodes against
// a scripted drive with ground truth) and the training kernels: `bench
// kernels` (pkg/nn against PyTorch on this CPU).
func runBench(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) > 0 && args[0] == "kernels" {
		return runBenchKernels(ctx, env, args[1:])
	}
	if len(args) > 0 && args[0] == "chaos" {
		return runBenchChaos(ctx, env, args[1:])
	}
	if len(args) == 0 || (args[0] != "latency" && args[0] != "soak" && args[0] != "scenario" && args[0] != "multicam") {
		return errors.New("usage: didoedge bench latency|soak|scenario|multicam|chaos|kernels [flags]")
	}
	mode := args[0]
	if mode == "scenario" {
		return runBenchScenario(ctx, env, args[1:])
	}
	if mode == "multicam" {
		return runBenchMulticam(ctx, env, args[1:])
	}
	f := bench.LatencyFlags{Mode: mode}
	fs := newFlagSet(env, "bench "+mode)
	f.AddFlags(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	inf, err := f.Inference.Config()
	if err != nil {
		return err
	}
	if f.CPUProfile != "" {
		stop, err := profiling.StartCPU(f.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	return f.Run(ctx, inf, env.stdout, env.log)
}

// runBenchScenario drives the simulated camera through a scripted drive
// with ground-truth segments and reports the alert episodes against it.
func runBenchScenario(ctx context.Context, env *cliEnv, args []string) error {
	var f bench.ScenarioFlags
	fs := newFlagSet(env, "bench scenario")
	f.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return f.Run(ctx, env.stdout, env.log)
}

// runBenchKernels checks and times pkg/nn's layers against PyTorch
// (pkg/nn/nnbench) and prints the table: GFLOP/s of both, their ratio and
// their fractions of the measured FMA peak.
func runBenchKernels(ctx context.Context, env *cliEnv, args []string) error {
	var f nnbench.Flags
	fs := newFlagSet(env, "bench kernels")
	f.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o, err := f.Options(env.log)
	if err != nil {
		return err
	}
	r, err := nnbench.Run(ctx, o)
	if err != nil {
		return err
	}
	if err := r.WriteTable(env.stdout); err != nil || f.JSON == "" {
		return err
	}
	return r.WriteJSONFile(f.JSON)
}

// runBenchMulticam measures N cameras in one runtime against the
// single-session bound. Each camera count and the bound run in a child
// process of their own (this binary with --child), so that each RSS is
// that configuration's alone.
func runBenchMulticam(ctx context.Context, env *cliEnv, args []string) error {
	var f bench.MulticamFlags
	fs := newFlagSet(env, "bench multicam")
	f.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	run, err := f.MulticamRun(env.log)
	if err != nil {
		return err
	}
	if f.Child >= 0 {
		return run.Child(ctx, f.Child, env.stdout)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	run.Exec = f.ChildCommand(self)
	return run.Run(ctx, env.stdout)
}

// runBenchChaos is `didoedge bench chaos`: the runtime in a child process
// against mosquitto and the embedded broker in turn, under a seeded fault
// script, with persistent subscribers (bench.Chaos).
func runBenchChaos(ctx context.Context, env *cliEnv, args []string) error {
	var f bench.ChaosFlags
	fs := newFlagSet(env, "bench chaos")
	f.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	return f.Run(ctx, self, env.stdout, env.log)
}
