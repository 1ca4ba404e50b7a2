package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/didoedge/didoedge/runtime/apps/demo"
	"github.com/didoedge/didoedge/runtime/record"
	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/stream"
)

// runDemo runs the whole system on embedded defaults: the simulated camera
// over RTSP, the reference models, the embedded broker and the debug page.
func runDemo(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "demo")
	models := fs.String("models", "models", "directory of the reference models")
	mqttURL := fs.String("mqtt", "", "publish to this external broker (tcp://host:port) instead of the embedded one")
	brokerAddr := fs.String("broker", "127.0.0.1:1883", "embedded broker listen address")
	httpAddr := fs.String("http", "127.0.0.1:8080", `debug page address ("off" disables)`)
	duration := fs.Duration("duration", 0, "stop after this long (0: until Ctrl-C)")
	fps := fs.Float64("fps", 15, "simulated camera frame rate")
	seed := fs.Int64("seed", 1, "simulated world seed")
	calFrames := fs.Int("calibrate-frames", 12, "without models/calibration.yaml: calibrate thresholds on this many rendered outdoor frames first (0: built-in defaults)")
	nCams := fs.Int("cameras", 1, fmt.Sprintf("simulated cameras (1..%d): front, left and right (headings 0, -30 and +30 degrees, seeds seed+i), then cam3.. ; one runtime, one model session", demo.MaxCameras))
	zonesEvery := fs.Duration("zones-every", 2*time.Second, "print every zone's level and fused signals this often (0: never)")
	recDir := fs.String("record", "", "record MCAP files (Foxglove; didoedge replay) into this directory")
	recMode := fs.String("record-mode", record.ModeEvent, "with --record: event (a clip per episode) or continuous")
	recFormat := fs.String("record-format", "jpeg", "with --record: jpeg, or png (lossless: replays reproduce the events exactly)")
	foxglove := fs.String("foxglove", "", "serve the live view (Foxglove WebSocket, control API) on this address, e.g. 127.0.0.1:8765")
	foxgloveToken := fs.String("foxglove-token-file", "", "with --foxglove on a non-loopback address: file holding the clients' token")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *nCams < 1 || *nCams > demo.MaxCameras {
		return fmt.Errorf("--cameras %d: want 1..%d", *nCams, demo.MaxCameras)
	}
	locked := *env
	locked.stdout = &lockedWriter{w: env.stdout}
	env = &locked
	if err := demo.CheckLibrary(); err != nil {
		return err
	}
	ref, err := demo.ReadReference(*models)
	if err != nil {
		return err
	}
	spec := ref.Depth
	work, err := os.MkdirTemp("", "didoedge-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	opts := demo.Options{ModelsDir: *models, MQTT: *mqttURL, BrokerListen: *brokerAddr, HTTP: *httpAddr,
		WorkDir: work, FPS: *fps, Seed: *seed, Logger: env.log, Snapshots: true}
	if _, err := os.Stat(filepath.Join(*models, demo.CalibrationFn)); err != nil && *calFrames > 0 {
		fmt.Fprintf(env.stdout, "didoedge demo: no %s: calibrating thresholds on %d rendered outdoor frames (target false-alarm rate 1%%)...\n",
			filepath.Join(*models, demo.CalibrationFn), *calFrames)
		path, res, err := demo.CalibrateOnSim(ctx, opts, *calFrames, 0.01)
		if err != nil {
			return err
		}
		opts.Calibration = path
		fmt.Fprintf(env.stdout, "didoedge demo: tau_e %.3f, tau_a %.3f, scale correction %.3f (didoedge calibrate --models %s --data DIR --out %s keeps one)\n",
			res.Calibration.TauE, res.Calibration.TauA, res.Calibration.ScaleCorrection, *models, filepath.Join(*models, demo.CalibrationFn))
	}
	var cams []*demo.Camera
	if *nCams == 1 {
		cam, err := demo.StartCamera(opts, spec.Input.Width, spec.Input.Height)
		if err != nil {
			return err
		}
		cams = []*demo.Camera{cam}
	} else if cams, err = demo.StartCameras(opts, spec.Input.Width, spec.Input.Height, *nCams); err != nil {
		return err
	}
	cam := cams[0]
	defer cam.Server.Close()
	cfg, err := demo.ConfigForCameras(opts, ref, cams)
	if err != nil {
		return err
	}
	if *recDir != "" {
		if cfg.Record, err = demo.RecordConfig(*recMode, *recDir, *recFormat, spec.Input.Width, spec.Input.Height, *seed); err != nil {
			return fmt.Errorf("demo --record: %w", err)
		}
	}
	if *foxglove != "" {
		cfg.Live = runconfig.LiveConfig{Listen: *foxglove, TokenFile: *foxgloveToken}
		if err := cfg.Live.Finish("--foxglove"); err != nil {
			return err
		}
	}
	// The console's printers stop before the command returns.
	console := demo.Console{Out: env.stdout, Cameras: cams, Width: spec.Input.Width, Height: spec.Input.Height, FPS: *fps,
		MQTT: *mqttURL, TopicPrefix: cfg.AlertsConfig.TopicPrefix, ZonesEvery: *zonesEvery}
	consoleCtx, stopConsole := context.WithCancel(ctx)
	wait := func() {}
	defer func() { stopConsole(); wait() }()
	started := func(p *stream.Pipeline, page string) { wait = console.Start(consoleCtx, p, page) }
	return servePipeline(ctx, env, cfg, stream.Options{}, true, started)
}
