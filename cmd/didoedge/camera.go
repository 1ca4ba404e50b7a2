package main

import (
	"context"
	"fmt"
	"time"

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
	fs := newFlagSet(env, "camera probe")
	frames := fs.Int("frames", 30, "number of frames to decode")
	udp := fs.Bool("udp", false, "receive RTP over UDP instead of TCP")
	timeout := fs.Duration("timeout", 20*time.Second, "give up after this long")
	stall := fs.Duration("stall", 2*time.Second, "no-frame watchdog")
	// The URL may come before or after the flags.
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: didoedge camera probe URL [--frames N] [--udp] [--timeout D] [--stall D]")
	}
	url := pos[0]
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	cfg := camera.RTSPConfig{URL: url, UDP: *udp, StallTimeout: *stall, Logger: env.log}
	rep, err := camera.Probe(ctx, cfg, *frames, func(f *camera.Frame) {
		fmt.Fprintf(env.stdout, "frame %4d  %dx%d  capture %s  latency %7.2f ms\n",
			f.Seq, f.Width, f.Height, f.Capture.Format("15:04:05.000"), float64(f.Decoded.Sub(f.Capture).Microseconds())/1000)
	})
	if err != nil {
		return err
	}
	rep.Write(env.stdout, url)
	return nil
}
