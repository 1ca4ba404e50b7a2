package main

import (
	"context"
	"errors"
)

// runToy is implemented with the auxue package (issue auxue-core).
func runToy(_ context.Context, env *cliEnv, args []string) error {
	return errors.New("toy: not built yet")
}
