package replay

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/mqttpub"
	"github.com/didoedge/didoedge/runtime/apps/demo"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/record"
	"github.com/didoedge/didoedge/runtime/record/mcapsource"
	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/stream"
)

// RunOptions configure Run: `didoedge replay`.
type RunOptions struct {
	// File names the recording: the local file read when Open is nil, or
	// an s3:// URL that Open streams.
	File string
	// Open, when set, opens the recording: a replay reads it two times,
	// three with Compare (its frames' range and events, the frames, the
	// recorded maps alongside), each one streamed pass (one GET).
	Open mcapsource.Opener
	// Config is a runtime config file (models, calibration, zones; its
	// camera and record sections are not used); "" runs the demo config of
	// ModelsDir (the reference models).
	Config, ModelsDir string
	// Speed is the pace: 0 as fast as inference allows, 1 the recorded
	// pace, 2 twice as fast; SpeedName is how the user wrote it.
	Speed     float64
	SpeedName string
	// Camera is the camera id ("": the only camera of the file).
	Camera string
	// Compare lists recorded against replayed events; a mismatch is an
	// error. It also compares the recorded maps, rebuilt at the frame's
	// size, with the replay's (MapsResult: reported, not an error).
	Compare bool
	// Publish sends the events with the config's MQTT section (false: a
	// private embedded broker and a temporary outbox).
	Publish bool
	// Quiet does not print the replayed events.
	Quiet bool
	Out   io.Writer
	Log   *slog.Logger
}

// Run feeds a recording's frames through the pipeline, in order and
// without dropping one, with the models and calibration of a config (or
// the reference models), and optionally compares the events with the
// recorded ones.
func Run(ctx context.Context, o RunOptions) error {
	if o.Open == nil {
		o.Open = mcapsource.FileOpener(o.File)
	}
	rec, err := record.ReadRecordingFrom(o.File, o.Open, o.Camera)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "didoedge-replay-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var cfg *runconfig.Config
	if o.Config != "" {
		if cfg, err = runconfig.Load(o.Config); err != nil {
			return err
		}
	} else {
		if err := demo.CheckLibrary(); err != nil {
			return err
		}
		if cfg, err = demo.Config(demo.Options{ModelsDir: o.ModelsDir, WorkDir: tmp, HTTP: runconfig.HTTPOff, BrokerListen: "127.0.0.1:0"},
			"rtsp://127.0.0.1:1/unused"); err != nil {
			return err
		}
	}
	if err := localAlerts(cfg, rec.Camera, tmp, o.Publish); err != nil {
		return err
	}

	w := o.Out
	fmt.Fprintf(w, "replay %s: camera %s, %d frames (seq %d..%d, %s), speed %s\n", o.File, rec.Camera, rec.Frames, rec.FirstSeq, rec.LastSeq,
		rec.Last.Sub(rec.First).Round(1e6), o.SpeedName)
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

	src, err := mcapsource.Open(mcapsource.Config{Path: o.File, Open: o.Open, Camera: rec.Camera, Speed: o.Speed})
	if err != nil {
		return err
	}
	defer src.Close()
	var replayed []alerts.Event
	opts := stream.Options{Source: src, Logger: o.Log, OnEvent: func(ev *alerts.Event) {
		replayed = append(replayed, *ev)
		if !o.Quiet {
			fmt.Fprintln(w, stream.FormatEvent(ev))
		}
	}}
	var maps *mapComparer
	if o.Compare {
		if maps, err = newMapComparer(o.File, o.Open, rec.Camera); err != nil {
			return err
		}
		defer maps.close()
		opts.OnMaps = func(_ string, seq uint64, m infer.Maps) { maps.frame(seq, m) }
	}
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
	if !o.Compare {
		return nil
	}
	fmt.Fprintln(w)
	recorded, err := RecordedEvents(rec)
	if err != nil {
		return err
	}
	res := Compare(rec, recorded, replayed)
	res.Write(w)
	fmt.Fprintln(w)
	maps.result().Write(w)
	if !res.Match() {
		return fmt.Errorf("replay differs from the recording in %d events", res.Mismatches)
	}
	return nil
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
