package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/internal/testmodels"
)

// Test model size: small, so that a frame runs in milliseconds on the
// shared CI machine.
const testH, testW = 32, 64

// writeTestModels writes the seeded random-weight test models
// (internal/testmodels) into dir: outputs are meaningless, but shapes and
// wiring are real.
func writeTestModels(t testing.TB, dir string) (depth, aux string) {
	t.Helper()
	f := testmodels.Write(t, dir)
	return f.Depth, f.AuxUE
}

// testConfigYAML is a complete config for the test models; %[1]s is the
// camera section, %[2]s the calibration file, %[3]s the zones.
const testConfigYAML = `camera:
%[1]s
inference:
  providers: [{name: cpu}]
  intra_op_threads: 1
depth:
  model: depth.onnx
  io:
    input: {name: image, height: 32, width: 64, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}
    depth: {name: depth, meaning: metric_depth}
    features: [{name: features}]
auxue:
  model: auxue.onnx
  io:
    input: {name: image, height: 32, width: 64, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}
    depth_input: {name: depth, units: metres}
    scale: {name: scale, units: metres}
    epistemic: {name: epistemic}
alerts:
  vehicle: testcar
  camera: front
  calibration: %[2]s
%[3]s
  events: {fusion_time_constant: 0s, exit_inertia: 0s, min_episode: 0s, merge_window: 0s, camera_stall: 0s}
  mqtt: {broker: embedded, client_id: didoedge-test, stats_interval: 1s, close_timeout: 5s}
  outbox: {dir: outbox}
  embedded: {listen: "127.0.0.1:0", allow_anonymous: true}
http:
  listen: "off"
`

const testZones = `  grid: {rows: 1, cols: 2}`

// calibration that never alarms (K/S <= 1, only the OOD criterion).
const quietCalibration = `version: 1
tau_e: 1
tau_a: 1000
scale_correction: 1
coverage: 0.9
levels:
  ood_fraction: {warn: {enter: 0.5, exit: 0.4}, critical: {enter: 0.9, exit: 0.8}}
`

// calibration that alarms on every pixel (K/S > 1e-6 everywhere).
const alarmCalibration = `version: 1
tau_e: 0.000001
tau_a: 1000
scale_correction: 1
coverage: 0.9
levels:
  ood_fraction: {warn: {enter: 0.5, exit: 0.4}, critical: {enter: 0.9, exit: 0.8}}
`

// testSetup writes models, calibrations and a config into a temp dir.
type testSetup struct {
	dir, config string
}

func newTestSetup(t testing.TB, calibration, zones string) *testSetup {
	t.Helper()
	dir := t.TempDir()
	writeTestModels(t, dir)
	for name, text := range map[string]string{"quiet.yaml": quietCalibration, "alarm.yaml": alarmCalibration} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &testSetup{dir: dir, config: filepath.Join(dir, "runtime.yaml")}
	s.write(t, calibration, zones)
	return s
}

func (s *testSetup) write(t testing.TB, calibration, zones string) {
	t.Helper()
	text := fmt.Sprintf(testConfigYAML, "  url: rtsp://127.0.0.1:1/unused", calibration, zones)
	if err := os.WriteFile(s.config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func requireORT(t testing.TB) {
	t.Helper()
	if os.Getenv("ONNXRUNTIME_LIB") == "" {
		// infer finds the project copy itself; this only documents the need.
		if _, err := os.Stat(filepath.Join("..", "third_party", "onnxruntime")); err != nil {
			t.Fatalf("ONNX Runtime missing: run `bash scripts/deps.sh` (or set ONNXRUNTIME_LIB)")
		}
	}
}

// synthSource publishes synthetic RGB frames into a mailbox at a fixed
// rate, like a camera: the consumer gets the newest frame only.
type synthSource struct {
	*camera.Mailbox
	w, h   int
	period time.Duration
	mu     sync.Mutex
	level  uint8 // brightness offset, changeable mid-stream
	paused bool  // no frames while set (a camera that stalls)
}

// pause stops (true) or resumes the frames without ending the source.
func (s *synthSource) pause(on bool) {
	s.mu.Lock()
	s.paused = on
	s.mu.Unlock()
}

func newSynthSource(w, h int, fps float64) *synthSource {
	return &synthSource{Mailbox: camera.NewMailbox(), w: w, h: h, period: time.Duration(float64(time.Second) / fps)}
}

func (s *synthSource) run(ctx context.Context, frames int) {
	f := camera.Frame{SourceID: "front", Width: s.w, Height: s.h}
	t := time.NewTicker(s.period)
	defer t.Stop()
	defer s.Close(nil)
	for i := 1; frames <= 0 || i <= frames; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if cap(f.RGB) < 3*s.w*s.h {
			f.RGB = make([]uint8, 3*s.w*s.h)
		}
		f.RGB = f.RGB[:3*s.w*s.h]
		s.mu.Lock()
		lv, paused := s.level, s.paused
		s.mu.Unlock()
		if paused {
			continue
		}
		for j := range f.RGB {
			f.RGB[j] = uint8(j*7+i*3) + lv
		}
		f.Seq, f.Capture, f.Decoded = uint64(i), time.Now(), time.Now()
		s.Publish(&f)
	}
}

func mustContain(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}
