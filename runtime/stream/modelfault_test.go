package stream

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// sqrtDepthModel is a depth model whose output is NaN on dark frames:
// depth = sqrt(mean over the channels of the input), the input normalized
// as the test config says, (p/255 - 0.5)/0.25: a black frame gives
// sqrt(-2), a white one sqrt(2) = 1.41 m everywhere.
func sqrtDepthModel(t *testing.T, dir string) string {
	t.Helper()
	bl := onnx.NewBuilder("sqrt-depth")
	x := bl.Input("image", 1, 3, testH, testW)
	w := bl.Const("w", []int64{1, 3, 1, 1}, []float32{1. / 3, 1. / 3, 1. / 3})
	b := bl.Const("b", []int64{1}, []float32{0})
	bl.Rename(bl.Op("Sqrt", []string{bl.Op("Conv", []string{x, w, b})}), "depth")
	bl.OutputShaped("depth", 1, 1, testH, testW)
	path := filepath.Join(dir, "sqrt-depth.onnx")
	if err := onnx.WriteFile(path, bl.Model()); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestModelFaultIsNotACameraStall runs the pipeline on the NaN-on-dark
// depth model with a 500 ms camera stall limit and feeds dark frames for
// 1.5 s, then white ones: the dark frames raise one model_fault episode
// (model_non_finite), counted and reported degraded by health (which still
// passes: a restart would not mend the model), and never a camera fault;
// the first assessed white frame ends the episode and health is ok again.
func TestModelFaultIsNotACameraStall(t *testing.T) {
	requireORT(t)
	s := newTestSetup(t, "quiet.yaml", "  grid: {rows: 1, cols: 2}")
	text, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	cfgText := strings.Replace(string(text), `    input: {name: image, height: 32, width: 64, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}
    depth: {name: depth, meaning: metric_depth}
    features: [{name: features}]`, `    input: {name: image, height: 32, width: 64, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}
    depth: {name: depth, meaning: metric_depth}`, 1)
	cfgText = strings.Replace(cfgText, "model: depth.onnx", "model: "+sqrtDepthModel(t, s.dir), 1)
	cfgText = strings.Replace(cfgText, "camera_stall: 0s", "camera_stall: 500ms", 1)
	if cfgText == string(text) {
		t.Fatal("the test config did not change")
	}
	if err := os.WriteFile(s.config, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := runconfig.Load(s.config)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var evs []alerts.Event
	src := camera.NewMailbox()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := New(ctx, cfg, Options{Source: src, OnEvent: func(ev *alerts.Event) {
		mu.Lock()
		evs = append(evs, *ev)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	seq := uint64(0)
	feed := func(level uint8, d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			// Publish swaps buffers with the mailbox: a new frame each time.
			f := camera.Frame{SourceID: "front", Width: testW, Height: testH, RGB: make([]uint8, 3*testW*testH)}
			for i := range f.RGB {
				f.RGB[i] = level
			}
			seq++
			f.Seq, f.Capture = seq, time.Now()
			src.Publish(&f)
		}
	}
	kinds := func() (model, camera []alerts.Event) {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			switch ev.Kind {
			case alerts.KindModelFault:
				model = append(model, ev)
			case alerts.KindCameraFault:
				camera = append(camera, ev)
			}
		}
		return model, camera
	}
	feed(0, 1500*time.Millisecond)
	model, cam := kinds()
	if len(model) != 1 || model[0].Type != alerts.EventNew || model[0].Fault != alerts.FaultModelNonFinite || len(cam) != 0 {
		t.Fatalf("after 1.5 s of dark frames: model faults %+v, camera faults %+v; want one model_fault new, no camera fault", model, cam)
	}
	m := p.Metrics().Camera(0)
	if m.ModelFaults.Load() == 0 || m.Invalid.Load() != m.ModelFaults.Load() || m.Frames.Load() != 0 {
		t.Fatalf("counters: model faults %d, invalid %d, assessed %d", m.ModelFaults.Load(), m.Invalid.Load(), m.Frames.Load())
	}
	var scrape bytes.Buffer
	if _, err := p.Metrics().WriteTo(&scrape); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`didoedge_model_faults_total{camera="front"} `,
		`didoedge_model_run_faults_total{model="depth"} 0`, `didoedge_provider_info{model="depth",provider="cpu"} 1`} {
		if !strings.Contains(scrape.String(), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	h := p.Health()
	if !h.OK || h.Status != "degraded" || len(h.Cameras) != 1 || h.Cameras[0].State != "degraded" ||
		!strings.Contains(h.Cameras[0].Detail, "model fault") {
		t.Fatalf("health during the fault: %+v", h)
	}
	feed(255, time.Second)
	model, cam = kinds()
	if len(model) != 2 || model[1].Type != alerts.EventEnd || model[1].ID != model[0].ID || len(cam) != 0 {
		t.Fatalf("after white frames: model faults %+v, camera faults %+v; want the episode ended", model, cam)
	}
	if h := p.Health(); !h.OK || h.Status != "ok" {
		t.Fatalf("health after the fault: %+v", h)
	}
}
