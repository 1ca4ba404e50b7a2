package main

import (
	"context"
	"fmt"

	"github.com/didoedge/didoedge/internal/profiling"
	"github.com/didoedge/didoedge/offline/protocol"
)

// runEval runs the paper's depth protocol of a config and writes the report:
// didoedge eval --config FILE --out DIR [--cache DIR].
func runEval(ctx context.Context, env *cliEnv, args []string) error {
	var f protocol.Flags
	fs := newFlagSet(env, "eval")
	f.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := f.LoadConfig()
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
	if f.ReportOnly {
		return f.Rewrite(cfg, env.stdout)
	}
	// The pooled pixels are pointer-free and cheap to mark: the GC holding
	// the heap near its live size costs little, and without a limit the
	// default GOGC lets the heap grow to twice the live size.
	if err := profiling.SetMemoryLimit(f.MemoryLimit); err != nil {
		return fmt.Errorf("--memory-limit: %w", err)
	}
	if f.MemProfile != "" {
		stop := profiling.HeapPeak(ctx, f.MemProfile, env.log)
		defer stop()
	}
	return f.Evaluate(ctx, cfg, args, env.stdout, env.log)
}
