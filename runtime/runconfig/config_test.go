package runconfig

import (
	"fmt"

	"github.com/didoedge/didoedge/internal/testmodels"

	"gopkg.in/yaml.v3"

	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/internal/yamlstrict"
)

// configDir holds (empty) model files and a calibration, enough for the
// config checks, which look at paths but do not load models.
func configDir(t testing.TB) string {
	dir := t.TempDir()
	for _, f := range []string{"depth.onnx", "auxue.onnx"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "quiet.yaml"), []byte(testmodels.QuietCalibration), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "metres.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := alerts.WriteCalibration(f, alerts.DefaultCalibration()); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// A calibration with the native-confidence criterion.
	cc := alerts.DefaultCalibration()
	tauC := 0.3
	cc.TauC = &tauC
	cc.Levels.ConfidenceFraction = &alerts.Criterion{Warn: alerts.Hysteresis{Enter: 0.15, Exit: 0.1}, Critical: alerts.Hysteresis{Enter: 0.4, Exit: 0.3}}
	if f, err = os.Create(filepath.Join(dir, "confidence.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := alerts.WriteCalibration(f, cc); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Mkdir(filepath.Join(dir, "frames"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := "input: {name: image, height: 32, width: 64, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}\ndepth: {name: depth, meaning: metric_depth}\n"
	if err := os.WriteFile(filepath.Join(dir, "depth.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The auxue io of testmodels.ConfigYAML, and two replacements: a features-input
// AuxUE and the format before issue 17 (the scale in the depth slot).
const (
	auxContractIO = `    input: {name: image, height: 32, width: 64, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}
    depth_input: {name: depth, units: metres}
    scale: {name: scale, units: metres}
    epistemic: {name: epistemic}
`
	auxFeaturesIO = `    input: {name: features, channels: 4, height: 32, width: 64}
    scale: {name: scale}
    epistemic: {name: epistemic}
`
	auxLegacyIO = `    input: {name: features, channels: 4, height: 32, width: 64}
    depth: {name: scale, meaning: metric_depth}
    features: [{name: epistemic}]
`
)

func validConfig() string {
	return fmt.Sprintf(testmodels.ConfigYAML, "  url: rtsp://user:secret@127.0.0.1:8554/sim", "quiet.yaml", testmodels.ConfigZones)
}

func TestParseConfig(t *testing.T) {
	dir := configDir(t)
	tests := []struct {
		name  string
		edit  func(string) string
		parts []string // the error must contain each; none: valid
	}{
		{"valid", func(s string) string { return s }, nil},
		{"unknown top-level key", func(s string) string { return s + "extra: 1\n" }, []string{"cfg.yaml", "extra: unknown key"}},
		{"unknown nested key", func(s string) string {
			return strings.Replace(s, "  intra_op_threads: 1", "  intra_op_thread: 1", 1)
		}, []string{"cfg.yaml", "inference.intra_op_thread: unknown key"}},
		{"unknown key in the io spec", func(s string) string {
			return strings.Replace(s, "depth: {name: depth, meaning: metric_depth}", "depth: {name: depth, meanin: metric_depth}", 1)
		}, []string{"depth.io.depth.meanin: unknown key"}},
		{"unknown key in alerts", func(s string) string {
			return strings.Replace(s, "  vehicle: testcar", "  vehicle: testcar\n  vehicel: x", 1)
		}, []string{"cfg.yaml", "vehicel: unknown key"}},
		{"bad alerts value", func(s string) string {
			return strings.Replace(s, "exit_inertia: 0s", "exit_inertia: -1s", 1)
		}, []string{"cfg.yaml", "events.exit_inertia: -1s is negative"}},
		{"type error names the key", func(s string) string {
			return strings.Replace(s, "  intra_op_threads: 1", "  intra_op_threads: many", 1)
		}, []string{"inference.intra_op_threads", "many"}},
		{"threading keys", func(s string) string {
			return strings.Replace(s, "  intra_op_threads: 1", "  intra_op_threads: 1\n  thread_pool: session\n  thread_spinning: true", 1)
		}, nil},
		{"bad thread_pool", func(s string) string {
			return strings.Replace(s, "  intra_op_threads: 1", "  intra_op_threads: 1\n  thread_pool: shared", 1)
		}, []string{"cfg.yaml", `inference.thread_pool: "shared" is not one of global, session`}},
		{"device_tensors key", func(s string) string {
			return strings.Replace(s, "  intra_op_threads: 1", "  intra_op_threads: 1\n  device_tensors: off", 1)
		}, nil},
		{"bad device_tensors", func(s string) string {
			return strings.Replace(s, "  intra_op_threads: 1", "  intra_op_threads: 1\n  device_tensors: always", 1)
		}, []string{"cfg.yaml", `inference.device_tensors: "always" is not one of auto, on, off`}},
		{"bad thread_spinning", func(s string) string {
			return strings.Replace(s, "  intra_op_threads: 1", "  intra_op_threads: 1\n  thread_spinning: sometimes", 1)
		}, []string{"cfg.yaml", "inference.thread_spinning", "sometimes"}},
		{"missing model file", func(s string) string {
			return strings.Replace(s, "model: depth.onnx", "model: nope.onnx", 1)
		}, []string{"depth.model", "nope.onnx"}},
		{"io spec file", func(s string) string {
			return strings.Replace(s, "model: depth.onnx\n  io:\n    input: {name: image, height: 32, width: 64, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}\n    depth: {name: depth, meaning: metric_depth}\n    features: [{name: features}]",
				"model: depth.onnx\n  io_spec: depth.yaml", 1)
		}, nil},
		{"missing io spec file", func(s string) string {
			return strings.Replace(s, "model: depth.onnx\n  io:\n    input: {name: image, height: 32, width: 64, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}\n    depth: {name: depth, meaning: metric_depth}\n    features: [{name: features}]",
				"model: depth.onnx\n  io_spec: gone.yaml", 1)
		}, []string{"depth.io_spec", "gone.yaml"}},
		{"missing calibration", func(s string) string {
			return strings.Replace(s, "calibration: quiet.yaml", "calibration: none.yaml", 1)
		}, []string{"alerts.calibration", "none.yaml"}},
		{"camera url and sequence", func(s string) string {
			return strings.Replace(s, "  url: rtsp://user:secret@127.0.0.1:8554/sim", "  url: rtsp://127.0.0.1/x\n  sequence: {dir: frames}", 1)
		}, []string{"camera: url and sequence are exclusive"}},
		{"camera sequence", func(s string) string {
			return strings.Replace(s, "  url: rtsp://user:secret@127.0.0.1:8554/sim", "  sequence: {dir: frames, fps: 10}", 1)
		}, nil},
		{"camera sequence dir missing", func(s string) string {
			return strings.Replace(s, "  url: rtsp://user:secret@127.0.0.1:8554/sim", "  sequence: {dir: nowhere}", 1)
		}, []string{"camera.sequence.dir", "nowhere"}},
		{"camera url scheme hides credentials", func(s string) string {
			return strings.Replace(s, "rtsp://user:secret@", "http://user:secret@", 1)
		}, []string{"camera.url", "***@127.0.0.1"}},
		{"camera url port hides credentials", func(s string) string {
			return strings.Replace(s, "127.0.0.1:8554/sim", "127.0.0.1:rtsp/sim", 1)
		}, []string{"camera.url", "***@127.0.0.1:rtsp"}},
		{"auxue inputs for an AuxUE that owns its inputs", func(s string) string {
			return strings.Replace(s, "    epistemic: {name: epistemic}\n", "    epistemic: {name: epistemic}\n  inputs: [image, depth]\n", 1)
		}, []string{"auxue.inputs [image depth]", "computes its own features", `depth_input "depth"`}},
		{"auxue input unknown (features input)", func(s string) string {
			return strings.Replace(s, auxContractIO, auxFeaturesIO+"  inputs: [image, dpeth]\n", 1)
		}, []string{"auxue.inputs[1]", "dpeth", "image, depth, features"}},
		{"auxue built for another input", func(s string) string {
			return strings.Replace(s, "    input: {name: image, height: 32, width: 64, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}\n    depth_input",
				"    input: {name: image, height: 32, width: 48, color: bgr, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}\n    depth_input", 1)
		}, []string{"input.width: depth model 64, AuxUE 48", "input.color: depth model rgb, AuxUE bgr", "retrain it"}},
		{"auxue with the legacy depth slot", func(s string) string {
			return strings.Replace(s, auxContractIO, auxLegacyIO, 1)
		}, []string{"auxue.io.depth: an AuxUE has no depth output", "scale.name: empty"}},
		{"relative depth with the pessimistic depth criterion", func(s string) string {
			s = strings.Replace(s, "depth: {name: depth, meaning: metric_depth}", "depth: {name: depth, meaning: relative}", 1)
			s = strings.Replace(s, "depth_input: {name: depth, units: metres}", "depth_input: {name: depth, units: relative}", 1)
			s = strings.Replace(s, "scale: {name: scale, units: metres}", "scale: {name: scale, units: relative}", 1)
			return strings.Replace(s, "calibration: quiet.yaml", "calibration: metres.yaml", 1)
		}, []string{"alerts.calibration", "pessimistic_depth_m", "is relative", "remove that criterion"}},
		{"relative depth, epistemic criteria only", func(s string) string {
			s = strings.Replace(s, "depth: {name: depth, meaning: metric_depth}", "depth: {name: depth, meaning: relative}", 1)
			s = strings.Replace(s, "depth_input: {name: depth, units: metres}", "depth_input: {name: depth, units: relative}", 1)
			return strings.Replace(s, "scale: {name: scale, units: metres}", "scale: {name: scale, units: relative}", 1)
		}, nil},
		{"relative AuxUE on a metric depth model", func(s string) string {
			s = strings.Replace(s, "depth_input: {name: depth, units: metres}", "depth_input: {name: depth, units: relative}", 1)
			return strings.Replace(s, "scale: {name: scale, units: metres}", "scale: {name: scale, units: relative}", 1)
		}, []string{`depth_input.units: "relative"`, `depth.meaning "metric_depth" gives metres`}},
		{"confidence criterion without a confidence output", func(s string) string {
			return strings.Replace(s, "calibration: quiet.yaml", "calibration: confidence.yaml", 1)
		}, []string{"alerts.calibration: levels.confidence_fraction", "confidence.yaml", "depth.io.confidence"}},
		{"confidence criterion with a confidence output", func(s string) string {
			s = strings.Replace(s, "    features: [{name: features}]\n", "    features: [{name: features}]\n    confidence: {name: conf, meaning: ranking}\n", 1)
			return strings.Replace(s, "calibration: quiet.yaml", "calibration: confidence.yaml", 1)
		}, nil},
		{"confidence meaning unknown", func(s string) string {
			return strings.Replace(s, "    features: [{name: features}]\n", "    features: [{name: features}]\n    confidence: {name: conf, meaning: sigma}\n", 1)
		}, []string{"depth.io.confidence.meaning", `"sigma"`}},
		{"http listen", func(s string) string {
			return strings.Replace(s, `listen: "off"`, "listen: localhost", 1)
		}, []string{"http.listen", "localhost"}},
		{"provider name", func(s string) string {
			return strings.Replace(s, "providers: [{name: cpu}]", "providers: [{name: gpu}]", 1)
		}, []string{"inference.providers[0].name", "gpu"}},
		{"missing alerts", func(s string) string {
			i := strings.Index(s, "alerts:")
			j := strings.Index(s, "http:")
			return s[:i] + s[j:]
		}, []string{"alerts: missing section"}},
		{"not yaml", func(string) string { return "camera: [\n" }, []string{"cfg.yaml"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse(filepath.Join(dir, "cfg.yaml"), []byte(tc.edit(validConfig())), dir)
			if tc.parts == nil {
				if err != nil {
					t.Fatalf("valid config rejected: %v", err)
				}
				if cfg.Depth.IO == nil || cfg.Depth.IO.Input.Width != 64 {
					t.Fatalf("depth io spec not loaded: %+v", cfg.Depth.IO)
				}
				if !filepath.IsAbs(cfg.AlertsConfig.Outbox.Dir) || filepath.Dir(cfg.AlertsConfig.Outbox.Dir) != dir {
					t.Fatalf("outbox dir %q not resolved against %q", cfg.AlertsConfig.Outbox.Dir, dir)
				}
				return
			}
			testmodels.MustContain(t, err, tc.parts...)
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("error leaks the camera password: %v", err)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	dir := configDir(t)
	text := strings.Replace(validConfig(), "http:\n  listen: \"off\"\n", "", 1)
	cfg, err := Parse("cfg.yaml", []byte(text), dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTP.Listen != "127.0.0.1:8080" || cfg.HTTP.MaxFPS != 4 || cfg.Pipeline.Tick.Milliseconds() != 250 {
		t.Fatalf("defaults: %+v %+v", cfg.HTTP, cfg.Pipeline)
	}
	// An AuxUE that owns its inputs takes none from the config.
	if len(cfg.AuxUE.Inputs) != 0 || cfg.AuxUE.DepthScale != 1 || !cfg.AuxUE.IO.OwnsInputs() || cfg.AuxUE.IO.Kind != "auxue" {
		t.Fatalf("auxue defaults: %v %g %+v", cfg.AuxUE.Inputs, cfg.AuxUE.DepthScale, cfg.AuxUE.IO)
	}
	// A features-input AuxUE: the depth io lists a feature output, which
	// feeds it by default.
	cfg, err = Parse("cfg.yaml", []byte(strings.Replace(text, auxContractIO, auxFeaturesIO, 1)), dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.AuxUE.Inputs, ",") != "features" {
		t.Fatalf("features-input auxue default inputs: %v", cfg.AuxUE.Inputs)
	}
}

// TestShippedConfigsParse keeps configs/{vehicle,demo,jetson-orin}.yaml valid: every
// key known, every value accepted by the section parsers. Their files
// (models, certificates) live on the target, so paths are not checked here.
func TestShippedConfigsParse(t *testing.T) {
	for _, name := range []string{"vehicle.yaml", "demo.yaml", "jetson-orin.yaml"} {
		path := filepath.Join("..", "..", "configs", name)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var c Config
		if err := yamlstrict.Decode(data, &c); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := c.Inference.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.AuxUE.Description == "" && c.AuxUE.IOSpec == "" && (c.AuxUE.IO == nil || c.AuxUE.IO.Validate() != nil) {
			t.Fatalf("%s: auxue has neither a description nor a valid io", name)
		}
		alertsYAML, err := yaml.Marshal(&c.Alerts)
		if err != nil {
			t.Fatal(err)
		}
		parse := ParseAlerts
		if len(c.Cameras) > 0 {
			parse = ParseSharedAlerts
		}
		ac, err := parse(name+": alerts", alertsYAML)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, e := range c.Cameras {
			if err := alerts.ValidCamera(e.Name); err != nil {
				t.Fatalf("%s: cameras[%d].name: %v", name, i, err)
			}
			if e.HasZones() {
				if err := e.ZoneSet.Validate(fmt.Sprintf("cameras[%d]", i)); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
		}
		// The shipped configs spell out the defaults chosen with the
		// scenario benchmark (docs/alerts.md).
		written := strings.Contains(string(alertsYAML), "fusion_time_constant:") && strings.Contains(string(alertsYAML), "merge_window:")
		if got := ac.Events.Timing(); got != alerts.DefaultTiming() || !written {
			t.Fatalf("%s: events timing %v, want the defaults %v written out", name, got, alerts.DefaultTiming())
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	dir := configDir(f)
	f.Add(validConfig())
	f.Add("camera: {url: rtsp://x}\n")
	f.Add("cameras:\n  - {name: a, url: \"rtsp://127.0.0.1/a\", zones: [{name: z, polygon: [[0, 0], [1, 0], [1, 1]]}]}\n  - {name: a}\n")
	f.Add("cameras: [{name: b/c, sequence: {dir: frames}, grid: {rows: 99}}]\ncamera: {url: rtsp://x}\n")
	f.Add("alerts: [1, 2]\n")
	f.Add("depth: {io: {input: {name: a, height: -1, width: 0}}}\n")
	f.Add("camera:\n  sequence: {dir: frames, fps: -3}\nhttp: {max_fps: .nan}\n")
	f.Fuzz(func(t *testing.T, text string) {
		cfg, err := Parse("fuzz.yaml", []byte(text), dir)
		if err == nil && (cfg.Depth.IO == nil || cfg.AuxUE.IO == nil) {
			t.Fatalf("accepted a config without IO specs: %q", text)
		}
	})
}
