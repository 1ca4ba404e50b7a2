package offline

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// ToyFlags are the flags of `didoedge toy`.
type ToyFlags struct {
	Seeds, Dataset, Out string
	EpochsScale         float64
	Seed                uint64
	N                   int
}

// AddFlags declares the flags on fs.
func (f *ToyFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Seeds, "seeds", "", "train both sets for these seeds (e.g. 1-10) and print the per-seed table (--dataset and --out unused)")
	fs.StringVar(&f.Dataset, "dataset", "a", "toy data set: a (noise var 3 on [-3,0], 1 on [0,3]) or b (in-between gap on (-1,3))")
	fs.StringVar(&f.Out, "out", "", "output directory for curve.csv, train.csv and toy.png (required)")
	fs.Float64Var(&f.EpochsScale, "epochs-scale", 1, "multiplier on the paper's epochs (main 200, AuxUE 100)")
	fs.Uint64Var(&f.Seed, "seed", 1, "random seed for data, initialization and shuffling")
	fs.IntVar(&f.N, "n", 500, "number of training points")
}

// Run trains one toy set and writes its outputs to --out, or with --seeds
// both sets for each seed and prints the per-seed table; the summary goes
// to w, the training's progress to progress.
func (f *ToyFlags) Run(ctx context.Context, w, progress io.Writer) error {
	if f.Seeds != "" {
		list, err := ParseSeeds(f.Seeds)
		if err != nil {
			return fmt.Errorf("flag -seeds: %w", err)
		}
		cfg := ToyConfig{NTrain: f.N, EpochsScale: f.EpochsScale}
		start := time.Now()
		rows, err := RunToySeeds(ctx, cfg, list)
		if err != nil {
			return err
		}
		return WriteToySeedTable(w, cfg, rows, time.Since(start))
	}
	if f.Out == "" {
		return fmt.Errorf("--out is required")
	}
	if err := os.MkdirAll(f.Out, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	start := time.Now()
	res, err := RunToy(ctx, ToyConfig{Dataset: f.Dataset, NTrain: f.N, EpochsScale: f.EpochsScale, Seed: f.Seed, Progress: progress})
	if err != nil {
		return err
	}
	files, err := res.WriteOutputs(f.Out)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "toy %s: %d training points, %s\n", res.Dataset, len(res.TrainX), time.Since(start).Round(time.Millisecond))
	if err := res.WriteSummary(w); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "wrote %s\n", strings.Join(files, ", "))
	return err
}
