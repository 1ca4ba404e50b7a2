package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/didoedge/didoedge/offline"
)

// runToy reproduces the paper's 1D toy examples (supplementary A.1):
// didoedge toy --dataset a|b --out DIR [--epochs-scale F] [--seed S] [--n N],
// or the per-seed table of both sets: didoedge toy --seeds 1-10.
func runToy(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "toy")
	seeds := fs.String("seeds", "", "train both sets for these seeds (e.g. 1-10) and print the per-seed table (--dataset and --out unused)")
	dataset := fs.String("dataset", "a", "toy data set: a (noise var 3 on [-3,0], 1 on [0,3]) or b (in-between gap on (-1,3))")
	out := fs.String("out", "", "output directory for curve.csv, train.csv and toy.png (required)")
	scale := fs.Float64("epochs-scale", 1, "multiplier on the paper's epochs (main 200, AuxUE 100)")
	seed := fs.Uint64("seed", 1, "random seed for data, initialization and shuffling")
	n := fs.Int("n", 500, "number of training points")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *seeds != "" {
		list, err := offline.ParseSeeds(*seeds)
		if err != nil {
			return fmt.Errorf("flag -seeds: %w", err)
		}
		cfg := offline.ToyConfig{NTrain: *n, EpochsScale: *scale}
		start := time.Now()
		rows, err := offline.RunToySeeds(ctx, cfg, list)
		if err != nil {
			return err
		}
		return offline.WriteToySeedTable(env.stdout, cfg, rows, time.Since(start))
	}
	if *out == "" {
		return fmt.Errorf("--out is required")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	start := time.Now()
	res, err := offline.RunToy(ctx, offline.ToyConfig{Dataset: *dataset, NTrain: *n, EpochsScale: *scale, Seed: *seed, Progress: env.stderr})
	if err != nil {
		return err
	}
	files, err := res.WriteOutputs(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "toy %s: %d training points, %s\n", res.Dataset, len(res.TrainX), time.Since(start).Round(time.Millisecond))
	if err := res.WriteSummary(env.stdout); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "wrote %s\n", strings.Join(files, ", "))
	return nil
}
