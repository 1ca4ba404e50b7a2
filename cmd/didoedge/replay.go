package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/didoedge/didoedge/runtime/apps/replay"
)

// runReplay feeds a recording's frames through the pipeline, in order and
// without dropping one, with the models and calibration of a config (or
// the reference models), and optionally compares the events with the
// recorded ones.
func runReplay(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "replay")
	path := fs.String("config", "", "runtime config file (models, calibration, zones; its camera and record sections are not used); default: the demo config of --models")
	models := fs.String("models", "models", "reference models directory (without --config)")
	speed := fs.String("speed", "max", "1: the recorded pace (2: twice as fast ...); max: as fast as inference allows")
	compare := fs.Bool("compare", false, "compare the replayed events with the recorded ones; exit 1 on a mismatch")
	cam := fs.String("camera", "", "camera id (default: the only camera of the file)")
	publish := fs.Bool("publish", false, "publish the events with the config's MQTT section (default: a private embedded broker and a temporary outbox)")
	quiet := fs.Bool("quiet", false, "do not print the replayed events")
	// FILE may come before or after the flags.
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: didoedge replay FILE|s3://BUCKET/KEY [--config FILE] [--speed 1|max] [--compare]")
	}
	file := pos[0]
	pace, err := parseSpeed(*speed)
	if err != nil {
		return err
	}
	// FILE may be an s3:// object: each pass of the replay streams it.
	open := func() (io.ReadCloser, int64, error) { return env.store().Open(ctx, file) }
	return replay.Run(ctx, replay.RunOptions{File: file, Open: open, Config: *path, ModelsDir: *models, Speed: pace, SpeedName: *speed,
		Camera: *cam, Compare: *compare, Publish: *publish, Quiet: *quiet, Out: env.stdout, Log: env.log})
}

// parseSpeed reads --speed: max (0 for the source: as fast as consumed) or
// a positive factor of the recorded pace.
func parseSpeed(s string) (float64, error) {
	if s == "max" {
		return 0, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0) || v > 1000 {
		return 0, fmt.Errorf("--speed %q: want max or a factor in (0, 1000] (1: the recorded pace)", s)
	}
	return v, nil
}
