package corrupt

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/didoedge/didoedge/internal/objstore"
)

// Flags are the flags of `didoedge sim corrupt`.
type Flags struct {
	In, Out, Type     string
	Severity, Workers int
	Seed              uint64
	All               bool
}

// AddFlags declares the flags on fs.
func (f *Flags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.In, "in", "", "input data set directory (KITTI-like layout from `didoedge sim render`)")
	fs.StringVar(&f.Out, "out", "", "output directory (must not be inside --in)")
	fs.StringVar(&f.Type, "type", "", "corruption type, one of: "+strings.Join(Names(), ", "))
	fs.IntVar(&f.Severity, "severity", 0, "severity 1..5")
	fs.Uint64Var(&f.Seed, "seed", 0, "random seed (each frame derives its own from it and its path)")
	fs.BoolVar(&f.All, "all", false, "every type x every severity into OUT/<type>/<severity>/")
	fs.IntVar(&f.Workers, "workers", 0, "parallel workers (default GOMAXPROCS)")
}

// Options are CorruptDataset's options as the flags give them (one type
// and severity, or --all); errors name the flags.
func (f *Flags) Options(log *slog.Logger) (DatasetOptions, error) {
	if f.In == "" || f.Out == "" {
		return DatasetOptions{}, errors.New("--in and --out are required")
	}
	for _, d := range []struct{ flag, loc string }{{"--in", f.In}, {"--out", f.Out}} {
		if objstore.IsURL(d.loc) {
			// Corruption walks a local tree and hard-links the files it
			// leaves unchanged: object storage has neither.
			return DatasetOptions{}, fmt.Errorf("sim corrupt %s %s: s3:// is not supported: it reads and writes local directories; copy the data set locally (aws s3 sync), corrupt it, and upload the output", d.flag, d.loc)
		}
	}
	opts := DatasetOptions{In: f.In, Out: f.Out, Seed: f.Seed, Workers: f.Workers, Log: log}
	switch {
	case f.All && (f.Type != "" || f.Severity != 0):
		return DatasetOptions{}, errors.New("--all builds every type and severity; do not combine it with --type or --severity")
	case f.All:
		opts.Types = Names()
		opts.Severities = []int{1, 2, 3, 4, 5}
		opts.Nested = true
	case f.Type == "" || f.Severity == 0:
		return DatasetOptions{}, errors.New("give --type and --severity, or --all")
	default:
		if err := Validate(f.Type, f.Severity); err != nil {
			return DatasetOptions{}, err
		}
		opts.Types = []string{f.Type}
		opts.Severities = []int{f.Severity}
	}
	return opts, nil
}

// Run corrupts the data set as the flags say, with a progress line on
// progress at most every second and a closing line on w.
func (f *Flags) Run(ctx context.Context, w, progress io.Writer, log *slog.Logger) error {
	opts, err := f.Options(log)
	if err != nil {
		return err
	}
	start := time.Now()
	var mu sync.Mutex
	last := time.Time{}
	opts.Progress = func(done, total int) {
		mu.Lock()
		defer mu.Unlock()
		if done != total && time.Since(last) < time.Second {
			return
		}
		last = time.Now()
		fmt.Fprintf(progress, "sim corrupt: %d/%d frames (%.0f%%)\n", done, total, 100*float64(done)/float64(total))
	}
	stats, err := CorruptDataset(ctx, opts)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "wrote %d corrupted frames and %d unchanged files to %s in %s\n",
		stats.Frames, stats.Copied, f.Out, time.Since(start).Round(time.Millisecond))
	return err
}
