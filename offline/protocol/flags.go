package protocol

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Flags are the flags of `didoedge eval`.
type Flags struct {
	Config, Out, Cache, CPUProfile, MemProfile, MemoryLimit string
	ReportOnly                                              bool
}

// AddFlags declares the flags on fs.
func (f *Flags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Config, "config", "configs/eval-quick.yaml", "evaluation config (configs/eval-*.yaml)")
	fs.StringVar(&f.Out, "out", "", "output directory: results.json, report.md, PNG plots (required)")
	fs.StringVar(&f.Cache, "cache", "", "directory of trained models (default OUT/cache); re-runs load them instead of retraining")
	fs.BoolVar(&f.ReportOnly, "report-only", false, "write report.md and the plots again from OUT/results.json and the cached plot data, without evaluating")
	fs.StringVar(&f.CPUProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	fs.StringVar(&f.MemProfile, "memprofile", "", "write a heap profile taken when the live heap was largest (sampled every second) to this file")
	fs.StringVar(&f.MemoryLimit, "memory-limit", "3GiB", "soft limit of the Go heap (runtime/debug.SetMemoryLimit; B, KiB, MiB, GiB); 0 = none; GOMEMLIMIT in the environment takes precedence")
}

// LoadConfig checks the flags and loads --config.
func (f *Flags) LoadConfig() (*Config, error) {
	if f.Out == "" {
		return nil, fmt.Errorf("--out is required")
	}
	return LoadConfig(f.Config)
}

// Rewrite writes the report again from --out's results (--report-only)
// and says so on w.
func (f *Flags) Rewrite(cfg *Config, w io.Writer) error {
	rows, err := RewriteReport(cfg, f.Out, f.Cache)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "wrote %s/report.md again from %s/results.json (%d rows)\n", f.Out, f.Out, rows)
	return err
}

// Evaluate runs the protocol of cfg, writes the report to --out and says
// so on w; args (the command's arguments) are recorded in the report.
func (f *Flags) Evaluate(ctx context.Context, cfg *Config, args []string, w io.Writer, log *slog.Logger) error {
	cmd := "didoedge " + strings.Join(append([]string{"eval"}, args...), " ")
	res, curves, err := Run(ctx, cfg, Options{Out: f.Out, Cache: f.Cache, Command: cmd, ConfigPath: f.Config, Log: log})
	if err != nil {
		return err
	}
	if err := WriteReport(f.Out, cfg, res, curves); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "wrote %s/report.md and %s/results.json (%d rows) in %.0f s\n", f.Out, f.Out, len(res.Runs), res.Meta.WallSeconds["total"])
	return err
}
