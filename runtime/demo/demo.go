// Package demo assembles `didoedge demo`: the scripted simulated camera
// served over RTSP in-process, and a runtime configuration on embedded
// defaults that consumes it through the real RTSP client, runs the
// reference models, publishes to the embedded broker (or an external one)
// and serves the debug page.
package demo

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera/rtspserver"
	"github.com/didoedge/didoedge/offline"
	"github.com/didoedge/didoedge/runtime"
	"github.com/didoedge/didoedge/runtime/infer"
)

// Reference model files in the models directory.
const (
	DepthModel  = "depth.onnx"
	AuxUEModel  = "auxue.onnx"
	DepthIOSpec = "depth.yaml" // runtime/infer IO spec of depth.onnx
	// AuxUEDescription describes auxue.onnx's input and outputs (optional).
	AuxUEDescription = "auxue.yaml"
	Manifest         = "MANIFEST"
	CalibrationFn    = "calibration.yaml" // optional: `didoedge calibrate` output
)

// buildHints says which command makes each reference file.
var buildHints = map[string]string{
	DepthModel:  "`didoedge train depth`",
	DepthIOSpec: "`didoedge train depth`",
	AuxUEModel:  "`didoedge train auxue`",
	Manifest:    "`didoedge train depth`, then `didoedge train auxue`",
}

// Options configure the demo.
type Options struct {
	ModelsDir    string // reference models (default "models")
	MQTT         string // external broker URL; "" runs the embedded broker
	BrokerListen string // embedded broker address (default 127.0.0.1:1883)
	HTTP         string // debug page address (default 127.0.0.1:8080; "off")
	RTSPListen   string // simulated camera address (default 127.0.0.1:0)
	// WorkDir (required, existing) holds the outbox and the demo's
	// calibration file.
	WorkDir string
	FPS     float64 // camera frame rate (default 15)
	Seed    int64   // world seed (default 1)
	Phases  []Phase // default DefaultScenario()
	// Calibration overrides the calibration file (default: the models
	// directory's calibration.yaml if present, else built-in defaults).
	Calibration string
	// UpdateInterval sets alerts.events.update_interval (default 0: off).
	UpdateInterval time.Duration
	// Timing sets the fusion and hysteresis of alerts.events (nil: the
	// defaults, alerts.DefaultTiming).
	Timing *alerts.Timing
	// Snapshots turns event snapshots on, stored in WorkDir/snapshots.
	Snapshots bool
	// HomeAssistant turns Home Assistant MQTT discovery on.
	HomeAssistant bool
	Logger        *slog.Logger // for the camera server (default slog.Default())
	// Zones replaces the demo's four zones (ego lane, sides, road ahead).
	Zones []alerts.ZoneSpec
	// Precompute > 0 renders that many frames per phase up front and loops
	// them (see Scenario.Precompute).
	Precompute int
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
// that builds it, then checks every model file the demo reads (depth.onnx,
// depth.yaml, auxue.onnx and auxue.yaml when present) against the sha256
// that DIR/MANIFEST records for it, naming the file that differs: a
// truncated, damaged or swapped model is refused before anything starts.
// (calibration.yaml is the user's to rewrite with `didoedge calibrate`; its
// own parser checks it.)
func CheckModels(dir string) error {
	for _, f := range []string{Manifest, DepthModel, DepthIOSpec, AuxUEModel} {
		p := filepath.Join(dir, f)
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("reference model file %s is missing (%v); build the reference models with %s (see docs/models.md), or pass --models DIR",
				p, errors.Unwrap(err), buildHints[f])
		}
	}
	mpath := filepath.Join(dir, Manifest)
	f, err := os.Open(mpath)
	if err != nil {
		return err
	}
	defer f.Close()
	entries, err := offline.ParseManifest(f, mpath)
	if err != nil {
		return err
	}
	listed := map[string]offline.ManifestEntry{}
	for _, e := range entries {
		listed[e.File] = e
	}
	for _, name := range []string{DepthModel, DepthIOSpec, AuxUEModel, AuxUEDescription} {
		p := filepath.Join(dir, name)
		if name == AuxUEDescription && !fileExists(p) {
			continue
		}
		e, ok := listed[name]
		if !ok {
			return fmt.Errorf("%s is not listed in %s: the demo only runs models whose sha256 the manifest records", p, mpath)
		}
		sum, err := fileSHA256(p)
		if err != nil {
			return err
		}
		if sum != e.SHA256 {
			return fmt.Errorf("%s has sha256 %s, but %s records %s: the file is damaged, truncated or not the one the manifest describes; restore it, or rebuild it with: %s",
				p, sum, mpath, e.SHA256, e.Command)
		}
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// CheckLibrary finds the ONNX Runtime library or says how to get it.
func CheckLibrary() error {
	if _, err := infer.ResolveLibrary(""); err != nil {
		return fmt.Errorf("ONNX Runtime library: %w", err)
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
	if o.Precompute > 0 {
		if err := sc.Precompute(o.Precompute); err != nil {
			return nil, err
		}
	}
	srv, err := rtspserver.New(rtspserver.Config{Addr: o.RTSPListen, Logger: o.Logger,
		Generated: map[string]rtspserver.Generated{"sim": {Source: sc, FPS: o.FPS, Quality: 85}}})
	if err != nil {
		return nil, fmt.Errorf("simulated camera: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("simulated camera: %w", err)
	}
	return &Camera{Server: srv, Scenario: sc, URL: "rtsp://" + srv.Addr() + "/sim"}, nil
}

// Reference describes the reference models of a models directory.
type Reference struct {
	Dir   string
	Depth infer.IOSpec // from depth.yaml
	// AuxUE is the runtime/infer view of auxue.onnx and Inputs what feeds it.
	AuxUE  infer.IOSpec
	Inputs []string
}

// ReadReference reads depth.yaml and, when present, auxue.yaml. Without
// auxue.yaml the AuxUE is taken to read the normalized image and the depth
// in metres as one (1,4,H,W) tensor "features" and to return "scale" (b)
// and "epistemic" (K/S). With it, its input and outputs are used; when the
// depth model exposes feature outputs, the first one feeds the AuxUE as is.
func ReadReference(dir string) (*Reference, error) {
	if err := CheckModels(dir); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	specPath := filepath.Join(abs, DepthIOSpec)
	raw, err := os.ReadFile(specPath)
	if err != nil {
		return nil, err
	}
	depth, err := infer.ParseIOSpec(raw, specPath)
	if err != nil {
		return nil, err
	}
	r := &Reference{Dir: abs, Depth: depth, Inputs: []string{runtime.InputImage, runtime.InputDepth},
		AuxUE: infer.IOSpec{
			Input:    infer.InputSpec{Name: "features", Layout: "NCHW", Channels: 4, Height: depth.Input.Height, Width: depth.Input.Width},
			Depth:    infer.OutputSpec{Name: "scale", Meaning: infer.MeaningMetricDepth},
			Features: []infer.FeatureSpec{{Name: "epistemic"}},
		}}
	if len(depth.Features) > 0 {
		r.Inputs = []string{depth.Features[0].Name}
	}
	descPath := filepath.Join(abs, AuxUEDescription)
	raw, err = os.ReadFile(descPath)
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, err
	}
	if r.AuxUE, err = runtime.ParseAuxUEDescription(raw, descPath); err != nil {
		return nil, err
	}
	return r, nil
}

// Config builds the runtime configuration of the demo for a camera URL,
// through the same parser and checks as a config file.
func Config(o Options, cameraURL string) (*runtime.Config, error) {
	o.defaults()
	ref, err := ReadReference(o.ModelsDir)
	if err != nil {
		return nil, err
	}
	a := ref.AuxUE
	auxIO := fmt.Sprintf("{input: {name: %q, layout: NCHW, channels: %d, height: %d, width: %d}, depth: {name: %q, meaning: metric_depth}, features: [{name: %q}]}",
		a.Input.Name, a.Input.Channels, a.Input.Height, a.Input.Width, a.Depth.Name, a.Features[0].Name)
	inputs, err := json.Marshal(ref.Inputs)
	if err != nil {
		return nil, err
	}
	if o.WorkDir == "" {
		return nil, errors.New("demo: work directory required")
	}
	models := ref.Dir
	cal := o.Calibration
	if p := filepath.Join(models, CalibrationFn); cal == "" && fileExists(p) {
		cal = p
	}
	if cal == "" {
		cal = filepath.Join(o.WorkDir, "demo-calibration.yaml")
		if err := writeDemoCalibration(cal); err != nil {
			return nil, err
		}
	}
	broker := "embedded"
	if o.MQTT != "" {
		broker = o.MQTT
	}
	zones := `
    - name: ego_lane_near
      polygon: [[0.38, 0.55], [0.62, 0.55], [0.85, 1.0], [0.15, 1.0]]
    - name: left_side
      polygon: [[0.0, 0.5], [0.38, 0.55], [0.15, 1.0], [0.0, 1.0]]
    - name: right_side
      polygon: [[0.62, 0.55], [1.0, 0.5], [1.0, 1.0], [0.85, 1.0]]
    - name: road_ahead
      polygon: [[0.3, 0.42], [0.7, 0.42], [0.62, 0.55], [0.38, 0.55]]`
	if len(o.Zones) > 0 {
		zones = ""
		for _, z := range o.Zones {
			poly, err := json.Marshal(z.Polygon)
			if err != nil {
				return nil, err
			}
			zones += fmt.Sprintf("\n    - {name: %q, polygon: %s}", z.Name, poly)
		}
	}
	tm := alerts.DefaultTiming()
	if o.Timing != nil {
		tm = *o.Timing
	}
	snapshots := ""
	if o.Snapshots {
		snapshots = filepath.Join(o.WorkDir, "snapshots")
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
  io: %s
  inputs: %s
alerts:
  vehicle: demo
  camera: front
  calibration: %q
  zones:%s
  events:
    fusion_time_constant: %s
    enter_inertia: %s
    critical_enter_inertia: %s
    exit_inertia: %s
    min_episode: %s
    merge_window: %s
    camera_stall: 3s
    update_interval: %s
  snapshots: {dir: %q, max_bytes: 16777216}
  homeassistant: {discovery: %v}
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
		filepath.Join(models, AuxUEModel), auxIO, inputs, cal, zones,
		tm.FusionTimeConstant, tm.EnterInertia, tm.CriticalEnterInertia, tm.ExitInertia, tm.MinEpisode, tm.MergeWindow, o.UpdateInterval, snapshots,
		o.HomeAssistant, broker, filepath.Join(o.WorkDir, "outbox"), o.BrokerListen, o.HTTP)
	return runtime.Parse("demo defaults", []byte(b.String()), models)
}

// writeDemoCalibration writes the built-in thresholds without the
// pessimistic-depth criterion: the demo camera sits on a car whose road
// a few metres ahead is always near, which would keep the lower zones
// critical and hide the out-of-distribution episodes the demo is about.
func writeDemoCalibration(path string) error {
	c := alerts.DefaultCalibration()
	c.Levels.PessimisticDepth = nil
	c.Meta = map[string]string{"source": "didoedge demo: built-in defaults without pessimistic_depth_m; run didoedge calibrate for calibrated thresholds"}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("demo calibration: %w", err)
	}
	if err := alerts.WriteCalibration(f, c); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
