package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/mqttpub"
	"github.com/didoedge/didoedge/camera/mcapsource"
	"github.com/didoedge/didoedge/runtime/apps/demo"
	"github.com/didoedge/didoedge/runtime/apps/replay"
	"github.com/didoedge/didoedge/runtime/record"
	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/stream"
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	file := ""
	if fs.NArg() > 0 {
		file = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return err
		}
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if file == "" {
		return errors.New("usage: didoedge replay FILE [--config FILE] [--speed 1|max] [--compare]")
	}
	pace, err := parseSpeed(*speed)
	if err != nil {
		return err
	}
	rec, err := replay.Read(file, *cam)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "didoedge-replay-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var cfg *runconfig.Config
	if *path != "" {
		if cfg, err = runconfig.Load(*path); err != nil {
			return err
		}
	} else {
		if err := demo.CheckLibrary(); err != nil {
			return err
		}
		if cfg, err = demo.Config(demo.Options{ModelsDir: *models, WorkDir: tmp, HTTP: runconfig.HTTPOff, BrokerListen: "127.0.0.1:0"},
			"rtsp://127.0.0.1:1/unused"); err != nil {
			return err
		}
	}
	if err := localAlerts(cfg, rec.Camera, tmp, *publish); err != nil {
		return err
	}

	w := env.stdout
	fmt.Fprintf(w, "replay %s: camera %s, %d frames (seq %d..%d, %s), speed %s\n", file, rec.Camera, rec.Frames, rec.FirstSeq, rec.LastSeq,
		rec.Last.Sub(rec.First).Round(1e6), *speed)
	ident, err := record.RunIdentity(cfg.Depth.Model, cfg.AuxUE.Model, []record.CameraFile{{Camera: rec.Camera, Calibration: cfg.AlertsConfig.Calibration}})
	if err != nil {
		return err
	}
	if rec.ModelsChanged {
		fmt.Fprintln(w, "the calibration or the models changed while this file was recorded (reload): compared with the last ones")
	}
	if ch := rec.ModelChanges(ident); len(ch) == 0 {
		fmt.Fprintln(w, "models and calibration: the recorded ones (same sha256)")
	} else {
		for _, c := range ch {
			fmt.Fprintln(w, "differs from the recording:", c)
		}
	}

	src, err := mcapsource.Open(mcapsource.Config{Path: file, Camera: rec.Camera, Speed: pace})
	if err != nil {
		return err
	}
	defer src.Close()
	var replayed []alerts.Event
	opts := stream.Options{Source: src, Logger: env.log, OnEvent: func(ev *alerts.Event) {
		replayed = append(replayed, *ev)
		if !*quiet {
			fmt.Fprintln(w, stream.FormatEvent(ev))
		}
	}}
	p, err := stream.New(ctx, cfg, opts)
	if err != nil {
		return err
	}
	if err := p.Run(ctx); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("replay interrupted after %d of %d frames", src.Frames(), rec.Frames)
	}
	m := p.Metrics().Camera(0) // a replay runs one camera
	fmt.Fprintf(w, "replayed %d frames (assessed %d, invalid outputs %d, errors %d), %d events\n", src.Frames(), m.Frames.Load(),
		m.Invalid.Load(), m.Errors.Load(), len(replayed))
	if src.Truncated() {
		fmt.Fprintln(w, "the recording ends inside a chunk (its writer was killed): every complete chunk was replayed")
	}
	if !*compare {
		return nil
	}
	fmt.Fprintln(w)
	res := replay.Compare(rec, replayed)
	res.Write(w)
	if !res.Match() {
		return fmt.Errorf("replay differs from the recording in %d events", res.Mismatches)
	}
	return nil
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

// localAlerts points the replay's alert engine at the recorded camera
// (with a cameras list: that camera's zones and calibration) and, unless
// publish, at a private embedded broker on a loopback port with a
// temporary outbox, so that a replay on the vehicle or in the office never
// mixes its events into the fleet's. Snapshots and Home Assistant
// discovery are off; the replay is not recorded again.
func localAlerts(cfg *runconfig.Config, cameraID, tmp string, publish bool) error {
	if err := cfg.OnlyCamera(cameraID); err != nil {
		return fmt.Errorf("replay camera %s: %w", cameraID, err)
	}
	cfg.Record.Mode = record.ModeOff
	cfg.HTTP.Listen = runconfig.HTTPOff
	ac := &cfg.AlertsConfig
	if publish {
		return nil
	}
	ac.MQTT.Broker = mqttpub.EmbeddedBroker
	ac.MQTT.Username, ac.MQTT.PasswordFile, ac.MQTT.PasswordEnv, ac.MQTT.TLS = "", "", "", nil
	ac.Embedded.Listen = "127.0.0.1:0"
	ac.Embedded.TLS, ac.Embedded.Users, ac.Embedded.AllowAnonymous = nil, nil, false
	ac.Outbox.Dir = filepath.Join(tmp, "outbox")
	ac.Snapshots.Dir = ""
	ac.HomeAssistant.Discovery = false
	return nil
}
