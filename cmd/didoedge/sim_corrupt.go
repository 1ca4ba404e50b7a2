package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/didoedge/didoedge/dataset/corrupt"
)

// runSimCorrupt implements `didoedge sim corrupt`: corrupt the RGB frames of
// a rendered data set with one corruption, or build a whole -C set (--all).
func runSimCorrupt(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "sim corrupt")
	in := fs.String("in", "", "input data set directory (KITTI-like layout from `didoedge sim render`)")
	out := fs.String("out", "", "output directory (must not be inside --in)")
	typ := fs.String("type", "", "corruption type, one of: "+strings.Join(corrupt.Names(), ", "))
	sev := fs.Int("severity", 0, "severity 1..5")
	seed := fs.Uint64("seed", 0, "random seed (each frame derives its own from it and its path)")
	all := fs.Bool("all", false, "every type x every severity into OUT/<type>/<severity>/")
	workers := fs.Int("workers", 0, "parallel workers (default GOMAXPROCS)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: didoedge sim corrupt --in DIR --out DIR (--type T --severity S | --all) [--seed N] [--workers N]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *in == "" || *out == "" {
		return errors.New("--in and --out are required")
	}
	opts := corrupt.DatasetOptions{In: *in, Out: *out, Seed: *seed, Workers: *workers, Log: env.log}
	switch {
	case *all && (*typ != "" || *sev != 0):
		return errors.New("--all builds every type and severity; do not combine it with --type or --severity")
	case *all:
		opts.Types = corrupt.Names()
		opts.Severities = []int{1, 2, 3, 4, 5}
		opts.Nested = true
	case *typ == "" || *sev == 0:
		return errors.New("give --type and --severity, or --all")
	default:
		if err := corrupt.Validate(*typ, *sev); err != nil {
			return err
		}
		opts.Types = []string{*typ}
		opts.Severities = []int{*sev}
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
		fmt.Fprintf(env.stderr, "sim corrupt: %d/%d frames (%.0f%%)\n", done, total, 100*float64(done)/float64(total))
	}
	stats, err := corrupt.CorruptDataset(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "wrote %d corrupted frames and %d unchanged files to %s in %s\n",
		stats.Frames, stats.Copied, *out, time.Since(start).Round(time.Millisecond))
	return nil
}
