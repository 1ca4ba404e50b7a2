// Package demo assembles `didoedge demo`: the scripted simulated camera
// served over RTSP in-process, and a runtime configuration on embedded
// defaults that consumes it through the real RTSP client, runs the
// reference models, publishes to the embedded broker (or an external one)
// and serves the debug page.
package demo

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera/simrig"
	"github.com/didoedge/didoedge/dataset/corrupt"
	"github.com/didoedge/didoedge/internal/boundedfile"
	"github.com/didoedge/didoedge/internal/manifest"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
	"github.com/didoedge/didoedge/runtime/runconfig"
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
	FPS     float64        // camera frame rate (default 15)
	Seed    int64          // world seed (default 1)
	Phases  []simrig.Phase // default simrig.DefaultScenario()
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
		o.Phases = simrig.DefaultScenario()
	}
}

// Rig is the simulated rig's configuration of these options (the
// scenario's corruptions by dataset/corrupt).
func (o Options) Rig() simrig.Config {
	o.defaults()
	return simrig.Config{Addr: o.RTSPListen, FPS: o.FPS, Seed: o.Seed, Phases: o.Phases, Precompute: o.Precompute, Logger: o.Logger,
		NewCorruptor: func() simrig.Corruptor { return corrupt.NewCorruptor() }}
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
	f, err := boundedfile.Open("", mpath, boundedfile.Config)
	if err != nil {
		return err
	}
	defer f.Close()
	entries, err := manifest.Parse(io.LimitReader(f, boundedfile.Config.Limit()), mpath)
	if err != nil {
		return err
	}
	listed := map[string]manifest.Entry{}
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
		sum, err := manifest.FileSHA256(p)
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

// CheckLibrary finds the ONNX Runtime library or says how to get it.
func CheckLibrary() error {
	if _, err := onnxrt.ResolveLibrary(""); err != nil {
		return fmt.Errorf("ONNX Runtime library: %w", err)
	}
	return nil
}

// Reference describes the models of a models directory: the files and
// their IO specs.
type Reference struct {
	Dir                   string
	DepthModel, DepthSpec string // files
	AuxUEModel            string
	// AuxUESpec is auxue.yaml, or "" when the directory has none (the
	// AuxUE then reads one (1,4,H,W) "features" tensor, the normalized
	// image and the depth in metres, and returns "scale" and "epistemic").
	AuxUESpec string
	Depth     infer.IOSpec // from depth.yaml
	AuxUE     infer.IOSpec // from auxue.yaml, or the default above
	// Inputs feed a features-input AuxUE (empty for one that owns its inputs).
	Inputs []string
}

// ReadReference reads depth.yaml and, when present, auxue.yaml.
func ReadReference(dir string) (*Reference, error) {
	if err := CheckModels(dir); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	r := &Reference{Dir: abs, DepthModel: filepath.Join(abs, DepthModel), DepthSpec: filepath.Join(abs, DepthIOSpec),
		AuxUEModel: filepath.Join(abs, AuxUEModel)}
	if r.Depth, err = readSpec(r.DepthSpec, infer.KindDepth); err != nil {
		return nil, err
	}
	desc := filepath.Join(abs, AuxUEDescription)
	if _, err := os.Stat(desc); errors.Is(err, os.ErrNotExist) {
		r.AuxUE = infer.IOSpec{Kind: infer.KindAuxUE,
			Input: infer.InputSpec{Name: "features", Layout: infer.LayoutNCHW, Channels: 4, Height: r.Depth.Input.Height, Width: r.Depth.Input.Width},
			Scale: infer.TensorSpec{Name: "scale"}, Epistemic: infer.TensorSpec{Name: "epistemic"}}
		r.Inputs = []string{runconfig.InputImage, runconfig.InputDepth}
		if len(r.Depth.Features) > 0 {
			r.Inputs = []string{r.Depth.Features[0].Name}
		}
		return r, nil
	}
	r.AuxUESpec = desc
	if r.AuxUE, err = readSpec(desc, infer.KindAuxUE); err != nil {
		return nil, err
	}
	if !r.AuxUE.OwnsInputs() {
		r.Inputs = []string{runconfig.InputImage, runconfig.InputDepth}
		if len(r.Depth.Features) > 0 {
			r.Inputs = []string{r.Depth.Features[0].Name}
		}
	}
	return r, nil
}

// ReferenceFiles describes a depth model and an AuxUE given by their
// files (any depth model and the AuxUE train auxue made for it); a spec
// path "" is the model's path with .yaml.
func ReferenceFiles(depth, depthSpec, aux, auxSpec string) (*Reference, error) {
	beside := func(model, spec string) string {
		if spec != "" {
			return spec
		}
		return strings.TrimSuffix(model, filepath.Ext(model)) + ".yaml"
	}
	// Relative paths name files from the working directory, as in every
	// other command (the config parser would resolve them against the
	// depth model's directory): make them absolute first.
	abs := func(key, p string) (string, error) {
		a, err := filepath.Abs(p)
		if err != nil {
			return "", fmt.Errorf("%s %q: %w", key, p, err)
		}
		return a, nil
	}
	paths := []*string{&depth, &depthSpec, &aux, &auxSpec}
	for i, key := range []string{"depth model", "depth spec", "auxue model", "auxue spec"} {
		if *paths[i] == "" {
			continue
		}
		var err error
		if *paths[i], err = abs(key, *paths[i]); err != nil {
			return nil, err
		}
	}
	r := &Reference{Dir: filepath.Dir(depth), DepthModel: depth, DepthSpec: beside(depth, depthSpec), AuxUEModel: aux, AuxUESpec: beside(aux, auxSpec)}
	for _, f := range []struct{ key, path string }{{"depth model", r.DepthModel}, {"depth spec", r.DepthSpec}, {"auxue model", r.AuxUEModel}, {"auxue spec", r.AuxUESpec}} {
		if _, err := os.Stat(f.path); err != nil {
			return nil, fmt.Errorf("%s: %w", f.key, err)
		}
	}
	var err error
	if r.Depth, err = readSpec(r.DepthSpec, infer.KindDepth); err != nil {
		return nil, err
	}
	if r.AuxUE, err = readSpec(r.AuxUESpec, infer.KindAuxUE); err != nil {
		return nil, err
	}
	if !r.AuxUE.OwnsInputs() {
		r.Inputs = []string{runconfig.InputImage, runconfig.InputDepth}
	}
	return r, nil
}

func readSpec(path, kind string) (infer.IOSpec, error) {
	raw, err := boundedfile.Read("", path, boundedfile.Spec)
	if err != nil {
		return infer.IOSpec{}, err
	}
	return infer.ParseIOSpecKind(raw, path, kind)
}

// Config builds the runtime configuration of the demo for a camera URL,
// through the same parser and checks as a config file.
func Config(o Options, cameraURL string) (*runconfig.Config, error) {
	o.defaults()
	ref, err := ReadReference(o.ModelsDir)
	if err != nil {
		return nil, err
	}
	return ConfigFor(o, ref, cameraURL)
}

// ConfigFor is Config for the models ref describes (any depth model and
// its AuxUE, e.g. for didoedge calibrate --depth ... --auxue ...).
func ConfigFor(o Options, ref *Reference, cameraURL string) (*runconfig.Config, error) {
	return ConfigForCameras(o, ref, []*simrig.Camera{{Name: "front", URL: cameraURL}})
}

// ConfigForCameras is ConfigFor for the cameras of a simulated rig: one
// camera gives the single camera form (alerts.camera front), several a
// cameras list with the demo's zones for every camera.
func ConfigForCameras(o Options, ref *Reference, cams []*simrig.Camera) (*runconfig.Config, error) {
	doc, err := ConfigDoc(o, ref, cams)
	if err != nil {
		return nil, err
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("demo config: %w", err)
	}
	return runconfig.Parse("demo defaults", data, ref.Dir)
}

// ConfigDoc is the YAML document of ConfigForCameras before parsing: a
// caller that runs the config in another process (bench chaos) edits it
// and writes it to a file.
func ConfigDoc(o Options, ref *Reference, cams []*simrig.Camera) (map[string]any, error) {
	o.defaults()
	if len(cams) == 0 {
		return nil, errors.New("demo: no cameras")
	}
	if o.WorkDir == "" {
		return nil, errors.New("demo: work directory required")
	}
	auxSpec := ref.AuxUESpec
	if auxSpec == "" { // the default description, written for the parser to read
		data, err := ref.AuxUE.Marshal("AuxUE IO assumed by the demo: no auxue.yaml beside " + ref.AuxUEModel)
		if err != nil {
			return nil, err
		}
		auxSpec = filepath.Join(o.WorkDir, "auxue-default.yaml")
		if err := os.WriteFile(auxSpec, data, 0o644); err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
	}
	cal := o.Calibration
	if p := filepath.Join(ref.Dir, CalibrationFn); cal == "" && fileExists(p) {
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
	zones := []alerts.ZoneSpec{
		{Name: "ego_lane_near", Polygon: [][2]float64{{0.38, 0.55}, {0.62, 0.55}, {0.85, 1.0}, {0.15, 1.0}}},
		{Name: "left_side", Polygon: [][2]float64{{0.0, 0.5}, {0.38, 0.55}, {0.15, 1.0}, {0.0, 1.0}}},
		{Name: "right_side", Polygon: [][2]float64{{0.62, 0.55}, {1.0, 0.5}, {1.0, 1.0}, {0.85, 1.0}}},
		{Name: "road_ahead", Polygon: [][2]float64{{0.3, 0.42}, {0.7, 0.42}, {0.62, 0.55}, {0.38, 0.55}}},
	}
	if len(o.Zones) > 0 {
		zones = o.Zones
	}
	tm := alerts.DefaultTiming()
	if o.Timing != nil {
		tm = *o.Timing
	}
	snapshots := ""
	if o.Snapshots {
		snapshots = filepath.Join(o.WorkDir, "snapshots")
	}
	type m = map[string]any
	auxue := m{"model": ref.AuxUEModel, "io_spec": auxSpec}
	if len(ref.Inputs) > 0 {
		auxue["inputs"] = ref.Inputs
	}
	doc := m{
		"inference": m{"providers": []m{{"name": "cpu"}}},
		"depth":     m{"model": ref.DepthModel, "io_spec": ref.DepthSpec},
		"auxue":     auxue,
		"alerts": m{
			"vehicle": "demo", "calibration": cal, "zones": zones,
			"events": m{
				"fusion_time_constant":   tm.FusionTimeConstant.String(),
				"enter_inertia":          tm.EnterInertia.String(),
				"critical_enter_inertia": tm.CriticalEnterInertia.String(),
				"exit_inertia":           tm.ExitInertia.String(),
				"min_episode":            tm.MinEpisode.String(),
				"merge_window":           tm.MergeWindow.String(),
				"camera_stall":           "3s",
				"update_interval":        o.UpdateInterval.String(),
			},
			"snapshots":     m{"dir": snapshots, "max_bytes": 16 << 20},
			"homeassistant": m{"discovery": o.HomeAssistant},
			"mqtt":          m{"broker": broker, "client_id": "didoedge-demo", "stats_interval": "5s", "close_timeout": "3s"},
			"outbox":        m{"dir": filepath.Join(o.WorkDir, "outbox")},
			"embedded":      m{"listen": o.BrokerListen, "allow_anonymous": true},
		},
		"http": m{"listen": o.HTTP, "max_fps": 4},
	}
	if len(cams) == 1 {
		doc["camera"] = m{"url": cams[0].URL, "stall_timeout": "3s"}
		doc["alerts"].(m)["camera"] = cams[0].Name
	} else {
		var list []m
		for _, c := range cams {
			list = append(list, m{"name": c.Name, "url": c.URL, "stall_timeout": "3s"})
		}
		doc["cameras"] = list
	}
	return doc, nil
}

// writeDemoCalibration writes the built-in thresholds without the
// pessimistic-depth criterion: the demo camera sits on a car whose road
// a few metres ahead is always near, which would keep the lower zones
// critical and hide the out-of-distribution episodes the demo is about.
func writeDemoCalibration(path string) error {
	c := alerts.DefaultCalibration()
	c.Levels.PessimisticDepth = nil
	c.Meta = map[string]string{"source": "didoedge demo: built-in defaults without pessimistic_depth_m; run didoedge calibrate for calibrated thresholds"}
	if err := alerts.SaveCalibration(path, c); err != nil {
		return fmt.Errorf("demo calibration: %w", err)
	}
	return nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
