package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

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
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *out == "" {
		return fmt.Errorf("--out is required")
	}
	cfg, err := protocol.LoadConfig(*config)
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if *reportOnly {
		return rewriteReport(env, cfg, *out, *cache)
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
		stop := heapPeakProfile(ctx, *memProfile, env)
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

// heapPeakProfile samples the live heap every second and writes a heap
// profile to path whenever it is 5 % above the largest seen so far, so that
// the file shows what was live at the peak. The returned func stops it.
func heapPeakProfile(ctx context.Context, path string, env *cliEnv) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var peak uint64
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			metrics.Read(sample)
			if live := sample[0].Value.Uint64(); live > peak+peak/20 {
				peak = live
				if err := writeHeapProfile(path); err != nil {
					env.log.Warn("eval: heap profile", "err", err)
					return
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("--memprofile %q: %w", path, err)
	}
	return f.Close()
}

// rewriteReport renders the report of an earlier run of the same config.
func rewriteReport(env *cliEnv, cfg *protocol.Config, out, cache string) error {
	if cache == "" {
		cache = filepath.Join(out, "cache")
	}
	res, err := protocol.ReadResults(filepath.Join(out, "results.json"))
	if err != nil {
		return err
	}
	curves, err := protocol.LoadCurves(protocol.CurvesPath(cache, cfg))
	if err != nil {
		return err
	}
	if err := protocol.WriteReport(out, cfg, res, curves); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "wrote %s/report.md again from %s/results.json (%d rows)\n", out, out, len(res.Runs))
	return nil
}

// startCPUProfile starts a CPU profile into path (--cpuprofile); stop
// ends it and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile %q: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
