package nnbench

import (
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
)

// Flags are the flags of `didoedge bench kernels`.
type Flags struct {
	Threads, Python, Only, JSON string
	Rounds                      int
	MinTime                     time.Duration
}

// AddFlags declares the flags on fs.
func (f *Flags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Threads, "threads", "1,2", "comma-separated thread counts (GOMAXPROCS and torch.set_num_threads)")
	fs.IntVar(&f.Rounds, "rounds", 5, "interleaved Go/PyTorch rounds per case; the table shows medians")
	fs.DurationVar(&f.MinTime, "min-time", 300*time.Millisecond, "time per measurement")
	fs.StringVar(&f.Python, "python", "/usr/bin/python3", "Python interpreter with PyTorch (Debian's python3-torch)")
	fs.StringVar(&f.Only, "only", "", "run only the cases whose name contains this text")
	fs.StringVar(&f.JSON, "json", "", "also write the report as JSON to this file")
}

// Options are Run's options as the flags give them: the thread counts of
// --threads and the default cases whose name contains --only.
func (f *Flags) Options(log *slog.Logger) (Options, error) {
	o := Options{Rounds: f.Rounds, MinTime: f.MinTime, Python: f.Python, Log: log}
	for _, s := range strings.Split(f.Threads, ",") {
		t, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || t < 1 {
			return Options{}, fmt.Errorf("--threads: %q is not a positive integer", s)
		}
		o.Threads = append(o.Threads, t)
	}
	for _, c := range DefaultCases() {
		if strings.Contains(c.Name, f.Only) {
			o.Cases = append(o.Cases, c)
		}
	}
	if len(o.Cases) == 0 {
		return Options{}, fmt.Errorf("--only %q matches no case", f.Only)
	}
	return o, nil
}

// WriteJSONFile writes the report as indented JSON to path.
func (r *Report) WriteJSONFile(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
