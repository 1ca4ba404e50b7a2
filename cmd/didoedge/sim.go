package main

import (
	"context"
	"fmt"
)

// runSim dispatches `didoedge sim <render|corrupt|serve>`.
func runSim(ctx context.Context, env *cliEnv, args []string) error {
	subs := map[string]func(context.Context, *cliEnv, []string) error{
		"render":  runSimRender,
		"corrupt": runSimCorrupt,
		"serve":   runSimServe,
	}
	if len(args) == 0 {
		return fmt.Errorf("usage: didoedge sim render|corrupt|serve [flags]")
	}
	f, ok := subs[args[0]]
	if !ok {
		return fmt.Errorf("unknown sim command %q (want render, corrupt or serve)", args[0])
	}
	return f(ctx, env, args[1:])
}
