package main

import (
	"context"
	"errors"
)

// runSimServe is written with its package (placeholder until then).
func runSimServe(_ context.Context, _ *cliEnv, _ []string) error {
	return errors.New("sim serve: not built yet")
}
