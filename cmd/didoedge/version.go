package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at link time with -ldflags "-X main.version=...".
var version = "dev"

func runVersion(_ context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "version")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rev := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = s.Value
			}
		}
	}
	_, err := fmt.Fprintf(env.stdout, "didoedge %s (%s) %s %s/%s\n", version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}
