package demo

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/didoedge/didoedge/camera/simrig"
	"github.com/didoedge/didoedge/runtime/record"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// ModelFlags choose the runtime config of a command that runs models over
// frames (calibrate, calibrate shard): a config file, or the demo's config
// with the reference models or with a depth model and its AuxUE.
type ModelFlags struct {
	Depth, DepthSpec, AuxUE, AuxUESpec, Config, Models string
}

// AddFlags declares the flags on fs.
func (f *ModelFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Depth, "depth", "", "depth model (without --config: overrides --models; any ONNX depth model with an IO spec)")
	fs.StringVar(&f.DepthSpec, "depth-spec", "", "IO spec of --depth (default: its path with .yaml)")
	fs.StringVar(&f.AuxUE, "auxue", "", "AuxUE model made by train auxue for --depth")
	fs.StringVar(&f.AuxUESpec, "auxue-spec", "", "IO spec of --auxue (default: its path with .yaml)")
	fs.StringVar(&f.Config, "config", "", "runtime config giving models and zones (default: the demo's, with --models)")
	fs.StringVar(&f.Models, "models", "models", "reference models directory (without --config)")
}

// RunConfig loads the runtime config the flags name; cleanup removes what
// it made (call it also on an error).
func (f *ModelFlags) RunConfig() (cfg *runconfig.Config, cleanup func(), err error) {
	cleanup = func() {}
	switch {
	case f.Config != "" && (f.Depth != "" || f.AuxUE != ""):
		return nil, cleanup, errors.New("--config gives the models; leave --depth and --auxue out")
	case (f.Depth == "") != (f.AuxUE == ""):
		return nil, cleanup, errors.New("--depth and --auxue go together (a depth model and the AuxUE trained for it)")
	case f.Config != "":
		cfg, err = runconfig.Load(f.Config)
		return cfg, cleanup, err
	}
	tmp, err := os.MkdirTemp("", "didoedge-calibrate-")
	if err != nil {
		return nil, cleanup, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	if f.Depth != "" {
		ref, err := ReferenceFiles(f.Depth, f.DepthSpec, f.AuxUE, f.AuxUESpec)
		if err != nil {
			return nil, cleanup, err
		}
		cfg, err = ConfigFor(Options{WorkDir: tmp, HTTP: runconfig.HTTPOff}, ref, "rtsp://127.0.0.1:1/unused")
		return cfg, cleanup, err
	}
	cfg, err = Config(Options{ModelsDir: f.Models, WorkDir: tmp, HTTP: runconfig.HTTPOff}, "rtsp://127.0.0.1:1/unused")
	return cfg, cleanup, err
}

// Flags are the flags of `didoedge demo`.
type Flags struct {
	Models, MQTT, Broker, HTTP       string
	Record, RecordMode, RecordFormat string
	Foxglove, FoxgloveToken          string
	Duration, ZonesEvery             time.Duration
	FPS                              float64
	Seed                             int64
	CalibrateFrames, Cameras         int
}

// AddFlags declares the flags on fs.
func (f *Flags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Models, "models", "models", "directory of the reference models")
	fs.StringVar(&f.MQTT, "mqtt", "", "publish to this external broker (tcp://host:port) instead of the embedded one")
	fs.StringVar(&f.Broker, "broker", "127.0.0.1:1883", "embedded broker listen address")
	fs.StringVar(&f.HTTP, "http", "127.0.0.1:8080", `debug page address ("off" disables)`)
	fs.DurationVar(&f.Duration, "duration", 0, "stop after this long (0: until Ctrl-C)")
	fs.Float64Var(&f.FPS, "fps", 15, "simulated camera frame rate")
	fs.Int64Var(&f.Seed, "seed", 1, "simulated world seed")
	fs.IntVar(&f.CalibrateFrames, "calibrate-frames", 12, "without models/calibration.yaml: calibrate thresholds on this many rendered outdoor frames first (0: built-in defaults)")
	fs.IntVar(&f.Cameras, "cameras", 1, fmt.Sprintf("simulated cameras (1..%d): front, left and right (headings 0, -30 and +30 degrees, seeds seed+i), then cam3.. ; one runtime, one model session", simrig.MaxCameras))
	fs.DurationVar(&f.ZonesEvery, "zones-every", 2*time.Second, "print every zone's level and fused signals this often (0: never)")
	fs.StringVar(&f.Record, "record", "", "record MCAP files (Foxglove; didoedge replay) into this directory")
	fs.StringVar(&f.RecordMode, "record-mode", record.ModeEvent, "with --record: event (a clip per episode) or continuous")
	fs.StringVar(&f.RecordFormat, "record-format", "jpeg", "with --record: jpeg, or png (lossless: replays reproduce the events exactly)")
	fs.StringVar(&f.Foxglove, "foxglove", "", "serve the live view (Foxglove WebSocket, control API) on this address, e.g. 127.0.0.1:8765")
	fs.StringVar(&f.FoxgloveToken, "foxglove-token-file", "", "with --foxglove on a non-loopback address: file holding the clients' token")
}

// Check refuses flag values that need no file to be refused.
func (f *Flags) Check() error {
	if f.Cameras < 1 || f.Cameras > simrig.MaxCameras {
		return fmt.Errorf("--cameras %d: want 1..%d", f.Cameras, simrig.MaxCameras)
	}
	return nil
}

// Session is a demo ready to run: its simulated cameras serve, Config is
// the runtime config and Console prints on the terminal.
type Session struct {
	Config  *runconfig.Config
	Console Console
	closers []func()
}

// Close stops the cameras and removes the work directory.
func (s *Session) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// Start prepares the demo the flags describe: without a calibration beside
// the models it first calibrates on rendered frames (saying so on out, the
// console's writer, which must be safe for concurrent writes); it starts
// the simulated cameras and makes the config. Close the session also on an
// error.
func (f *Flags) Start(ctx context.Context, out io.Writer, log *slog.Logger) (*Session, error) {
	s := &Session{}
	if err := CheckLibrary(); err != nil {
		return s, err
	}
	ref, err := ReadReference(f.Models)
	if err != nil {
		return s, err
	}
	spec := ref.Depth
	work, err := os.MkdirTemp("", "didoedge-demo-")
	if err != nil {
		return s, err
	}
	s.closers = append(s.closers, func() { os.RemoveAll(work) })
	opts := Options{ModelsDir: f.Models, MQTT: f.MQTT, BrokerListen: f.Broker, HTTP: f.HTTP,
		WorkDir: work, FPS: f.FPS, Seed: f.Seed, Logger: log, Snapshots: true}
	if _, err := os.Stat(filepath.Join(f.Models, CalibrationFn)); err != nil && f.CalibrateFrames > 0 {
		fmt.Fprintf(out, "didoedge demo: no %s: calibrating thresholds on %d rendered outdoor frames (target false-alarm rate 1%%)...\n",
			filepath.Join(f.Models, CalibrationFn), f.CalibrateFrames)
		path, res, err := CalibrateOnSim(ctx, opts, f.CalibrateFrames, 0.01)
		if err != nil {
			return s, err
		}
		opts.Calibration = path
		fmt.Fprintf(out, "didoedge demo: tau_e %.3f, tau_a %.3f, scale correction %.3f (didoedge calibrate --models %s --data DIR --out %s keeps one)\n",
			res.Calibration.TauE, res.Calibration.TauA, res.Calibration.ScaleCorrection, f.Models, filepath.Join(f.Models, CalibrationFn))
	}
	var cams []*simrig.Camera
	if f.Cameras == 1 {
		cam, err := simrig.StartCamera(opts.Rig(), spec.Input.Width, spec.Input.Height)
		if err != nil {
			return s, err
		}
		cams = []*simrig.Camera{cam}
	} else if cams, err = simrig.StartCameras(opts.Rig(), spec.Input.Width, spec.Input.Height, f.Cameras); err != nil {
		return s, err
	}
	s.closers = append(s.closers, func() { cams[0].Server.Close() })
	cfg, err := ConfigForCameras(opts, ref, cams)
	if err != nil {
		return s, err
	}
	if f.Record != "" {
		if cfg.Record, err = RecordConfig(f.RecordMode, f.Record, f.RecordFormat, spec.Input.Width, spec.Input.Height, f.Seed); err != nil {
			return s, fmt.Errorf("demo --record: %w", err)
		}
	}
	if f.Foxglove != "" {
		cfg.Live = runconfig.LiveConfig{Listen: f.Foxglove, TokenFile: f.FoxgloveToken}
		if err := cfg.Live.Finish("--foxglove"); err != nil {
			return s, err
		}
	}
	s.Config = cfg
	s.Console = Console{Out: out, Cameras: cams, Width: spec.Input.Width, Height: spec.Input.Height, FPS: f.FPS,
		MQTT: f.MQTT, TopicPrefix: cfg.AlertsConfig.TopicPrefix, ZonesEvery: f.ZonesEvery}
	return s, nil
}
