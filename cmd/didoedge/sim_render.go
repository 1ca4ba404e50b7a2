package main

import (
	"context"
	"errors"
)

// runSimRender is written with its package (placeholder until then).
func runSimRender(_ context.Context, _ *cliEnv, _ []string) error {
	return errors.New("sim render: not built yet")
}
