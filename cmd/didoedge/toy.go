package main

import (
	"context"

	"github.com/didoedge/didoedge/offline"
)

// runToy reproduces the paper's 1D toy examples (supplementary A.1):
// didoedge toy --dataset a|b --out DIR [--epochs-scale F] [--seed S] [--n N],
// or the per-seed table of both sets: didoedge toy --seeds 1-10.
func runToy(ctx context.Context, env *cliEnv, args []string) error {
	var f offline.ToyFlags
	fs := newFlagSet(env, "toy")
	f.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return f.Run(ctx, env.stdout, env.stderr)
}
