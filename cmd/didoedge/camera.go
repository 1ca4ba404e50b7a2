package main

import (
	"context"
	"fmt"

	"github.com/didoedge/didoedge/camera"
)

// runCamera dispatches `didoedge camera probe`.
func runCamera(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 0 || args[0] != "probe" {
		return fmt.Errorf("usage: didoedge camera probe URL [--frames N] [--udp] [--timeout D] [--stall D]")
	}
	return runCameraProbe(ctx, env, args[1:])
}

// runCameraProbe connects to an RTSP camera, decodes N frames and prints
// codec, size, rate and the capture-to-decoded latency of every frame.
func runCameraProbe(ctx context.Context, env *cliEnv, args []string) error {
	var f camera.ProbeFlags
	fs := newFlagSet(env, "camera probe")
	f.AddFlags(fs)
	// The URL may come before or after the flags.
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: didoedge camera probe URL [--frames N] [--udp] [--timeout D] [--stall D]")
	}
	return f.Probe(ctx, pos[0], env.stdout, env.log)
}
