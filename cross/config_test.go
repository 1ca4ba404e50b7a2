package cross

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/didoedge/didoedge/offline/modeltool"
	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

const jetsonConfig = "../configs/jetson-orin.yaml"

// deployment is the part of configs/jetson-orin.yaml (the runtime's config
// format, checked key by key by runtime's TestShippedConfigsParse) that this
// package cross-checks against the systemd unit and the Jetson providers.
type deployment struct {
	Inference yaml.Node `yaml:"inference"`
	Depth     struct {
		Model string    `yaml:"model"`
		IO    yaml.Node `yaml:"io"`
	} `yaml:"depth"`
	AuxUE struct {
		Model       string   `yaml:"model"`
		Description string   `yaml:"description"`
		Inputs      []string `yaml:"inputs"`
		DepthScale  float64  `yaml:"depth_scale"`
	} `yaml:"auxue"`
	Camera struct {
		URL            string        `yaml:"url"`
		UDP            bool          `yaml:"udp"`
		StallTimeout   time.Duration `yaml:"stall_timeout"`
		BackoffMin     time.Duration `yaml:"backoff_min"`
		BackoffMax     time.Duration `yaml:"backoff_max"`
		RequestTimeout time.Duration `yaml:"request_timeout"`
	} `yaml:"camera"`
	Alerts yaml.Node `yaml:"alerts"`
	HTTP   struct {
		Listen string  `yaml:"listen"`
		MaxFPS float64 `yaml:"max_fps"`
	} `yaml:"http"`
	Pipeline struct {
		Tick          time.Duration `yaml:"tick"`
		CameraRestart time.Duration `yaml:"camera_restart"`
	} `yaml:"pipeline"`
}

func loadDeployment(t *testing.T) ([]byte, deployment) {
	t.Helper()
	data, err := os.ReadFile(jetsonConfig)
	if err != nil {
		t.Fatal(err)
	}
	var d deployment
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", jetsonConfig, err)
	}
	return data, d
}

func section(t *testing.T, n *yaml.Node, name string) []byte {
	t.Helper()
	if n.Kind == 0 {
		t.Fatalf("%s: section %s missing", jetsonConfig, name)
	}
	out, err := yaml.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestJetsonOrinConfigParses runs every section of the Jetson config through
// the parser that owns it.
func TestJetsonOrinConfigParses(t *testing.T) {
	data, d := loadDeployment(t)

	inf, err := modeltool.ParseInferenceConfig(data, jetsonConfig)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range inf.Providers {
		names = append(names, p.Name)
	}
	if got := strings.Join(names, ","); got != "tensorrt,cuda,cpu" {
		t.Fatalf("providers %s, want tensorrt,cuda,cpu (TensorRT first, CPU last)", got)
	}
	trt := inf.Providers[0]
	if !trt.FP16 || !filepath.IsAbs(trt.EngineCacheDir) {
		t.Errorf("tensorrt: fp16 %v, engine_cache_dir %q: want fp16 and an absolute cache path", trt.FP16, trt.EngineCacheDir)
	}

	spec, err := infer.ParseIOSpec(section(t, &d.Depth.IO, "depth.io"), jetsonConfig+" depth.io")
	if err != nil {
		t.Fatal(err)
	}
	if spec.Input.Height%4 != 0 || spec.Input.Width%4 != 0 {
		t.Errorf("depth.io input %dx%d: want sizes divisible by 4", spec.Input.Height, spec.Input.Width)
	}
	for _, p := range []string{d.Depth.Model, d.AuxUE.Model} {
		if !filepath.IsAbs(p) || filepath.Ext(p) != ".onnx" {
			t.Errorf("model path %q: want an absolute .onnx path", p)
		}
	}

	cfg, err := runconfig.ParseAlerts(jetsonConfig+" alerts", section(t, &d.Alerts, "alerts"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Outbox.Dir != "/var/lib/didoedge/outbox" {
		t.Errorf("alerts.outbox.dir %q: the systemd unit only lets the service write /var/lib/didoedge/outbox", cfg.Outbox.Dir)
	}
	if !strings.HasPrefix(trt.EngineCacheDir, "/var/cache/didoedge") {
		t.Errorf("engine_cache_dir %q: the systemd unit only lets the service write /var/cache/didoedge", trt.EngineCacheDir)
	}

	c := d.Camera
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "rtsp" && u.Scheme != "rtsps") || u.Host == "" {
		t.Errorf("camera.url %q: want rtsp://host/path (%v)", c.URL, err)
	}
	if c.StallTimeout <= 0 || c.RequestTimeout <= 0 || c.BackoffMin <= 0 || c.BackoffMax < c.BackoffMin {
		t.Errorf("camera durations: stall %v, request %v, backoff %v..%v", c.StallTimeout, c.RequestTimeout, c.BackoffMin, c.BackoffMax)
	}
	if !strings.HasPrefix(d.HTTP.Listen, "127.0.0.1:") {
		t.Errorf("http.listen %q: the health check curls 127.0.0.1", d.HTTP.Listen)
	}
}

// TestJetsonOrinProvidersFallBackToCPU creates a session with the Jetson
// provider list on this machine's CPU-only ONNX Runtime: TensorRT and CUDA
// must each fail with one WARN line and the model must run on the CPU, with
// the TensorRT engine cache directory keyed by model, precision and shape.
func TestJetsonOrinProvidersFallBackToCPU(t *testing.T) {
	data, d := loadDeployment(t)
	inf, err := modeltool.ParseInferenceConfig(data, jetsonConfig)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := infer.ParseIOSpec(section(t, &d.Depth.IO, "depth.io"), jetsonConfig)
	if err != nil {
		t.Fatal(err)
	}
	spec.Features = nil // the stand-in network has no aux_features output
	inf.Library = ""    // the GPU build's path exists only on the Jetson: use $ONNXRUNTIME_LIB
	cache := t.TempDir()
	inf.Providers[0].EngineCacheDir = cache

	net, err := onnx.NewTinyUNet(2, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	h, w := int64(spec.Input.Height), int64(spec.Input.Width)
	m, err := net.Export([]int64{1, 3, h, w})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "depth.onnx")
	if err := onnx.WriteFile(path, m); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	sess, err := infer.NewSession(context.Background(), path, spec, inf, log)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if sess.Provider() != onnxrt.ProviderCPU {
		t.Fatalf("provider %q, want cpu on a CPU-only ONNX Runtime", sess.Provider())
	}
	for _, want := range []string{"provider=tensorrt next=cuda", "provider=cuda next=cpu"} {
		if n := strings.Count(logs.String(), want); n != 1 {
			t.Errorf("%d log lines with %q, want 1:\n%s", n, want, logs.String())
		}
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	wantSuffix := fmt.Sprintf("_fp16_1x3x%dx%d", h, w)
	if len(entries) != 1 || !strings.HasSuffix(entries[0].Name(), wantSuffix) {
		t.Errorf("engine cache entries %v, want one <sha256[:16]>%s", entries, wantSuffix)
	}
	rgb := make([]byte, 3*h*w)
	modeltool.SyntheticFrame(rgb, int(w), int(h), 1, 0)
	if err := sess.SetImageRGB8(rgb, int(w), int(h), 3*int(w)); err != nil {
		t.Fatal(err)
	}
	fr, err := sess.Run(context.Background())
	if err != nil || !fr.Valid {
		t.Fatalf("run: %v, valid %v", err, fr.Valid)
	}
}
