// Package demo assembles `didoedge demo`: the scripted simulated camera
// served over RTSP in-process, and a runtime configuration on embedded
// defaults that consumes it through the real RTSP client, runs the
// reference models, publishes to the embedded broker (or an external one)
// and serves the debug page.
package demo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/didoedge/didoedge/camera/rtspserver"
	"github.com/didoedge/didoedge/runtime"
	"github.com/didoedge/didoedge/runtime/infer"
)

// Reference model files in the models directory.
const (
	DepthModel    = "depth.onnx"
	AuxUEModel    = "auxue.onnx"
	DepthIOSpec   = "depth.yaml" // runtime/infer IO spec of depth.onnx
	Manifest      = "MANIFEST"
	CalibrationFn = "calibration.yaml" // optional: `didoedge calibrate` output
)

// buildHints says which command makes each reference file.
var buildHints = map[string]string{
	DepthModel:  "didoedge train depth",
	DepthIOSpec: "didoedge train depth",
	AuxUEModel:  "didoedge train auxue",
	Manifest:    "didoedge train depth, then didoedge train auxue",
}

// Options configure the demo.
type Options struct {
	ModelsDir    string  // reference models (default "models")
	MQTT         string  // external broker URL; "" runs the embedded broker
	BrokerListen string  // embedded broker address (default 127.0.0.1:1883)
	HTTP         string  // debug page address (default 127.0.0.1:8080; "off")
	RTSPListen   string  // simulated camera address (default 127.0.0.1:0)
	OutboxDir    string  // required: the outbox directory
	FPS          float64 // camera frame rate (default 15)
	Seed         int64   // world seed (default 1)
	Phases       []Phase // default DefaultScenario()
}

func (o *Options) defaults() {
	if o.ModelsDir == "" {
		o.ModelsDir = "models"
	}
	if o.BrokerListen == "" {
		o.BrokerListen = "127.0.0.1:1883"
	}
	if o.HTTP == "" {
		o.HTTP = "127.0.0.1:8080"
	}
	if o.RTSPListen == "" {
		o.RTSPListen = "127.0.0.1:0"
	}
	if o.FPS == 0 {
		o.FPS = 15
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if len(o.Phases) == 0 {
		o.Phases = DefaultScenario()
	}
}

// CheckModels reports the first missing reference file with the command
// that builds it.
func CheckModels(dir string) error {
	for _, f := range []string{Manifest, DepthModel, DepthIOSpec, AuxUEModel} {
		p := filepath.Join(dir, f)
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("reference model file %s is missing (%v); build the reference models with `%s` (see docs/models.md), or pass --models DIR",
				p, errors.Unwrap(err), buildHints[f])
		}
	}
	return nil
}

// CheckLibrary finds the ONNX Runtime library or says how to get it.
func CheckLibrary() error {
	if _, err := infer.ResolveLibrary(""); err != nil {
		return fmt.Errorf("ONNX Runtime library: %w (fetch it with `bash scripts/deps.sh`)", err)
	}
	return nil
}

// Camera is the running simulated camera.
type Camera struct {
	Server   *rtspserver.Server
	Scenario *Scenario
	URL      string
}

// StartCamera serves the scenario at rtsp://ADDR/sim, M-JPEG.
func StartCamera(o Options, width, height int) (*Camera, error) {
	o.defaults()
	sc, err := NewScenario(o.Phases, o.FPS, width, height, o.Seed)
	if err != nil {
		return nil, err
	}
	srv, err := rtspserver.New(rtspserver.Config{Addr: o.RTSPListen,
		Generated: map[string]rtspserver.Generated{"sim": {Source: sc, FPS: o.FPS, Quality: 85}}})
	if err != nil {
		return nil, fmt.Errorf("simulated camera: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("simulated camera: %w", err)
	}
	return &Camera{Server: srv, Scenario: sc, URL: "rtsp://" + srv.Addr() + "/sim"}, nil
}

// Config builds the runtime configuration of the demo for a camera URL and
// the depth model's input size, through the same parser and checks as a
// config file. The reference AuxUE (auxue/depthnet) reads the normalized
// image and the depth in metres as one (1,4,H,W) tensor "features" and
// returns the Laplace scale "scale" and K/S "epistemic" at (1,1,H,W).
func Config(o Options, cameraURL string, width, height int) (*runtime.Config, error) {
	o.defaults()
	if o.OutboxDir == "" {
		return nil, errors.New("demo: outbox directory required")
	}
	models, err := filepath.Abs(o.ModelsDir)
	if err != nil {
		return nil, err
	}
	cal := ""
	if p := filepath.Join(models, CalibrationFn); fileExists(p) {
		cal = p
	}
	broker := "embedded"
	if o.MQTT != "" {
		broker = o.MQTT
	}
	var b strings.Builder
	fmt.Fprintf(&b, `camera:
  url: %q
  stall_timeout: 3s
inference:
  providers: [{name: cpu}]
depth:
  model: %q
  io_spec: %q
auxue:
  model: %q
  io:
    input: {name: features, layout: NCHW, channels: 4, height: %d, width: %d}
    depth: {name: scale, meaning: metric_depth}
    features: [{name: epistemic}]
  inputs: [image, depth]
alerts:
  vehicle: demo
  camera: front
  calibration: %q
  zones:
    - name: ego_lane_near
      polygon: [[0.38, 0.55], [0.62, 0.55], [0.85, 1.0], [0.15, 1.0]]
    - name: left_side
      polygon: [[0.0, 0.5], [0.38, 0.55], [0.15, 1.0], [0.0, 1.0]]
    - name: right_side
      polygon: [[0.62, 0.55], [1.0, 0.5], [1.0, 1.0], [0.85, 1.0]]
    - name: road_ahead
      polygon: [[0.3, 0.42], [0.7, 0.42], [0.62, 0.55], [0.38, 0.55]]
  events:
    inertia_frames: 2
    min_hold: 1s
    camera_stall: 3s
  mqtt:
    broker: %q
    client_id: didoedge-demo
    stats_interval: 5s
    close_timeout: 3s
  outbox:
    dir: %q
  embedded:
    listen: %q
    allow_anonymous: true
http:
  listen: %q
  max_fps: 4
`, cameraURL, filepath.Join(models, DepthModel), filepath.Join(models, DepthIOSpec),
		filepath.Join(models, AuxUEModel), height, width, cal,
		broker, o.OutboxDir, o.BrokerListen, o.HTTP)
	return runtime.Parse("demo defaults", []byte(b.String()), models)
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
