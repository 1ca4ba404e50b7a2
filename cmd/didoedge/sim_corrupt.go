package main

import (
	"context"
	"errors"
)

// runSimCorrupt is written with its package (placeholder until then).
func runSimCorrupt(_ context.Context, _ *cliEnv, _ []string) error {
	return errors.New("sim corrupt: not built yet")
}
