package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/runtime/apps/demo"
	"github.com/didoedge/didoedge/runtime/record"
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
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
		// The simulated camera's intrinsics, for export and Foxglove's 3D panel.
		probe, err := sim.NewRenderer(sim.Config{World: sim.WorldOutdoor, Width: spec.Input.Width, Height: spec.Input.Height, Seed: *seed})
		if err != nil {
			return err
		}
		fx, fy, cx, cy := probe.Intrinsics()
		cfg.Record = record.Config{Mode: *recMode, Dir: *recDir, FrameFormat: *recFormat, Intrinsics: []float64{fx, fy, cx, cy}}.WithDefaults()
		if err := cfg.Record.Validate("record"); err != nil {
			return fmt.Errorf("demo --record: %w", err)
		}
	}
	// The scene announcer stops before the command returns.
	phaseCtx, stopPhases := context.WithCancel(ctx)
	var phases sync.WaitGroup
	defer phases.Wait()
	defer stopPhases()
	started := func(p *stream.Pipeline, page string) {
		if len(cams) == 1 {
			fmt.Fprintf(env.stdout, "didoedge demo: simulated camera %s (%dx%d, %g fps)\n", cam.URL, spec.Input.Width, spec.Input.Height, *fps)
		} else {
			for _, c := range cams {
				fmt.Fprintf(env.stdout, "didoedge demo: simulated camera %s %s (heading %+g deg, seed %d, %dx%d, %g fps)\n",
					c.Name, c.URL, c.Heading, c.Seed, spec.Input.Width, spec.Input.Height, *fps)
			}
		}
		if b := p.BrokerAddr(); b != "" {
			host, port := splitHostPort(b)
			fmt.Fprintf(env.stdout, "didoedge demo: embedded MQTT broker %s; watch: mosquitto_sub -h %s -p %s -t '%s/#' -v\n",
				b, host, port, cfg.AlertsConfig.TopicPrefix)
		} else {
			fmt.Fprintf(env.stdout, "didoedge demo: publishing to %s\n", *mqttURL)
		}
		if page != "" {
			fmt.Fprintf(env.stdout, "didoedge demo: debug page http://%s/  (metrics: /metrics)\n", page)
		}
		fmt.Fprintf(env.stdout, "didoedge demo: scenario:")
		for _, ph := range cam.Scenario.Phases() {
			fmt.Fprintf(env.stdout, " %s %v,", ph.Name, ph.Duration)
		}
		fmt.Fprintf(env.stdout, " looping; alert events follow, one line each\n")
		phases.Add(1)
		go func() {
			defer phases.Done()
			announcePhases(phaseCtx, env, cam.Scenario)
		}()
		if *zonesEvery > 0 {
			phases.Add(1)
			go func() {
				defer phases.Done()
				printZones(phaseCtx, env, p, *zonesEvery)
			}()
		}
	}
	return servePipeline(ctx, env, cfg, stream.Options{}, true, started)
}

// printZones prints every zone's level and fused signals periodically.
func printZones(ctx context.Context, env *cliEnv, p *stream.Pipeline, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			cams := p.Cameras()
			for _, cam := range cams {
				zs := p.CameraZoneStatus(cam)
				if len(zs) == 0 {
					continue
				}
				if len(cams) == 1 {
					fmt.Fprintln(env.stdout, stream.FormatZones(now, zs))
				} else {
					fmt.Fprintln(env.stdout, cam+" "+stream.FormatZones(now, zs))
				}
			}
		}
	}
}

// announcePhases prints a line when the simulated scene changes.
func announcePhases(ctx context.Context, env *cliEnv, sc *demo.Scenario) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	last := -1
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if cur := sc.Current(); cur >= 0 && cur != last {
				last = cur
				fmt.Fprintf(env.stdout, "%s scene  %s\n", time.Now().Format("15:04:05.000"), sc.Phases()[cur].Name)
			}
		}
	}
}

func splitHostPort(addr string) (string, string) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:]
		}
	}
	return addr, ""
}
