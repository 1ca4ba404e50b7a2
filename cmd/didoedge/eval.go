package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/didoedge/didoedge/internal/profiling"
	"github.com/didoedge/didoedge/offline/protocol"
)

// runEval runs the paper's depth protocol of a config and writes the report:
// didoedge eval --config FILE --out DIR [--cache DIR].
func runEval(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "eval")
	config := fs.String("config", "configs/eval-quick.yaml", "evaluation config (configs/eval-*.yaml)")
	out := fs.String("out", "", "output directory: results.json, report.md, PNG plots (required)")
	cache := fs.String("cache", "", "directory of trained models (default OUT/cache); re-runs load them instead of retraining")
	reportOnly := fs.Bool("report-only", false, "write report.md and the plots again from OUT/results.json and the cached plot data, without evaluating")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	memProfile := fs.String("memprofile", "", "write a heap profile taken when the live heap was largest (sampled every second) to this file")
	memLimit := fs.String("memory-limit", "3GiB", "soft limit of the Go heap (runtime/debug.SetMemoryLimit; B, KiB, MiB, GiB); 0 = none; GOMEMLIMIT in the environment takes precedence")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("--out is required")
	}
	cfg, err := protocol.LoadConfig(*config)
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		stop, err := profiling.StartCPU(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if *reportOnly {
		rows, err := protocol.RewriteReport(cfg, *out, *cache)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "wrote %s/report.md again from %s/results.json (%d rows)\n", *out, *out, rows)
		return nil
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		limit, err := parseBytes(*memLimit)
		if err != nil {
			return fmt.Errorf("--memory-limit: %w", err)
		}
		if limit > 0 {
			// The pooled pixels are pointer-free and cheap to mark: the GC
			// holding the heap near its live size costs little, and without it
			// the default GOGC lets the heap grow to twice the live size.
			debug.SetMemoryLimit(limit)
		}
	}
	if *memProfile != "" {
		stop := profiling.HeapPeak(ctx, *memProfile, env.log)
		defer stop()
	}
	cmd := "didoedge " + strings.Join(append([]string{"eval"}, args...), " ")
	res, curves, err := protocol.Run(ctx, cfg, protocol.Options{Out: *out, Cache: *cache, Command: cmd, ConfigPath: *config, Log: env.log})
	if err != nil {
		return err
	}
	if err := protocol.WriteReport(*out, cfg, res, curves); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "wrote %s/report.md and %s/results.json (%d rows) in %.0f s\n", *out, *out, len(res.Runs), res.Meta.WallSeconds["total"])
	return nil
}

// parseBytes reads a size like 3GiB, 512MiB, 100000 (bytes).
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	mult := int64(1)
	num := strings.TrimSpace(s)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			mult, num = u.mult, strings.TrimSpace(strings.TrimSuffix(num, u.suffix))
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || v*float64(mult) > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is not a size (e.g. 3GiB, 512MiB, 0)", s)
	}
	return int64(v * float64(mult)), nil
}
