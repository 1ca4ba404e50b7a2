package stream

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

// testSetup writes models, calibrations and a config into a temp dir.
type testSetup struct {
	dir, config string
}

func newTestSetup(t testing.TB, calibration, zones string) *testSetup {
	t.Helper()
	dir := t.TempDir()
	writeTestModels(t, dir)
	for name, text := range map[string]string{"quiet.yaml": testmodels.QuietCalibration, "alarm.yaml": testmodels.AlarmCalibration} {
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
	text := fmt.Sprintf(testmodels.ConfigYAML, "  url: rtsp://127.0.0.1:1/unused", calibration, zones)
	if err := os.WriteFile(s.config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func requireORT(t testing.TB) {
	t.Helper()
	if os.Getenv("ONNXRUNTIME_LIB") == "" {
		// infer finds the project copy itself; this only documents the need.
		if _, err := os.Stat(filepath.Join("..", "..", "third_party", "onnxruntime")); err != nil {
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
