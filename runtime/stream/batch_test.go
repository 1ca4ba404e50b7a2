package stream

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/testmodels"

	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// makeDynamic rewrites dir's test models with a dynamic batch dimension
// (onnx.DynamicBatch, what `didoedge model batch` runs).
func makeDynamic(t testing.TB, dir string) {
	t.Helper()
	for _, name := range []string{"depth.onnx", "auxue.onnx"} {
		path := filepath.Join(dir, name)
		m, err := onnx.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := onnx.DynamicBatch(m, ""); err != nil {
			t.Fatal(err)
		}
		if err := onnx.WriteFile(path, m); err != nil {
			t.Fatal(err)
		}
	}
}

// newBatchedPipeline is a three-camera pipeline on dynamic-batch test
// models, with extra appended to the config.
func newBatchedPipeline(t testing.TB, extra string) (*Pipeline, error) {
	t.Helper()
	return newBatchedPipelineEdit(t, func(s string) string { return s + extra })
}

// newBatchedPipelineEdit is newBatchedPipeline with the config's text
// rewritten by edit.
func newBatchedPipelineEdit(t testing.TB, edit func(string) string) (*Pipeline, error) {
	t.Helper()
	requireORT(t)
	s := newTestSetup(t, "quiet.yaml", testmodels.ConfigZones)
	makeDynamic(t, s.dir)
	path := multiConfig(t, s.dir, threeCameras, "quiet.yaml", testmodels.ConfigZones)
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(edit(string(text))), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := runconfig.Load(path)
	if err != nil {
		return nil, err
	}
	p, err := New(context.Background(), cfg, Options{Sources: []camera.Source{camera.NewMailbox(), camera.NewMailbox(), camera.NewMailbox()}})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { p.Close() })
	return p, nil
}

// stageAll stages one frame per camera into its first slot and returns
// the batch's slices.
func stageAll(t testing.TB, p *Pipeline, frames []*camera.Frame) ([]*cameraPipe, []*frameSlot) {
	t.Helper()
	var slots []*frameSlot
	for i, c := range p.cams {
		s := &c.slots[0]
		if s.st == nil {
			s.st = c.models.NewStaged()
		}
		if s.err = c.models.Stage(s.st, frames[i].RGB, frames[i].Width, frames[i].Height); s.err != nil {
			t.Fatal(s.err)
		}
		slots = append(slots, s)
	}
	return p.cams, slots
}

// TestBatchedPipeline: with dynamic-batch models and pipeline.batch_size 3
// on the CPU provider, one batch of the three cameras' frames (sizes of
// their own) gives each camera the zone risks the same frame gives alone
// (a batch of one), and the batched frame path allocates nothing. (The
// GPU default batch is tested where a GPU runs: runtime/infer gpu_test.go;
// a GPU provider that falls back to the CPU now runs one frame per run.)
func TestBatchedPipeline(t *testing.T) {
	p, err := newBatchedPipeline(t, "pipeline: {batch_size: 3}\n")
	if err != nil {
		t.Fatal(err)
	}
	if p.batch != 3 {
		t.Fatalf("batch %d, want pipeline.batch_size 3", p.batch)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !p.sink.connected() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	ctx := context.Background()
	frames := []*camera.Frame{testFrame(testW, testH), testFrame(2*testW, 2*testH), testFrame(testW+16, testH+8)}
	for i, f := range frames {
		for j := range f.RGB {
			f.RGB[j] = uint8(j*(7+4*i) + j/97)
		}
	}
	// Alone: each camera's frame in a batch of one.
	var alone [][]float64
	for i, c := range p.cams {
		frames[i].Seq = 1
		c.process(ctx, frames[i])
		var r []float64
		for _, z := range c.engine.LastRisks() {
			r = append(r, float64(z.OODFraction), float64(z.EpistemicP95), float64(z.NearestDepth), float64(z.PessimisticDepth))
		}
		alone = append(alone, r)
	}
	cams, slots := stageAll(t, p, frames)
	for _, f := range frames {
		f.Seq++
	}
	p.runBatch(ctx, cams, slots, frames)
	for i, c := range p.cams {
		k := 0
		for _, z := range c.engine.LastRisks() {
			for _, v := range []float64{float64(z.OODFraction), float64(z.EpistemicP95), float64(z.NearestDepth), float64(z.PessimisticDepth)} {
				if math.Abs(v-alone[i][k]) > 1e-5*max(1, math.Abs(v)) {
					t.Errorf("camera %s: batched risk %d = %g, alone %g", c.spec.Name, k, v, alone[i][k])
				}
				k++
			}
		}
		if k == 0 {
			t.Fatalf("camera %s: no zone risks", c.spec.Name)
		}
		if got := c.metrics.Frames.Load(); got != 2 {
			t.Fatalf("camera %s: %d frames, want 2", c.spec.Name, got)
		}
	}
	allocs := math.Inf(1)
	for range 3 {
		allocs = min(allocs, testing.AllocsPerRun(20, func() {
			for i, c := range p.cams {
				frames[i].Seq++
				frames[i].Capture = time.Now()
				if err := c.models.Stage(slots[i].st, frames[i].RGB, frames[i].Width, frames[i].Height); err != nil {
					t.Fatal(err)
				}
			}
			p.runBatch(ctx, cams, slots, frames)
		}))
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per batch of 3 frames, want 0", allocs)
	}
}

// TestBatchSizeConfig: pipeline.batch_size above 1 on fixed-batch models
// is refused naming the key and the model file; 1 turns batching off on
// dynamic models, as the CPU provider's default does; a size out of range
// names the key.
func TestBatchSizeConfig(t *testing.T) {
	requireORT(t)
	s := newTestSetup(t, "quiet.yaml", testmodels.ConfigZones)
	path := multiConfig(t, s.dir, threeCameras, "quiet.yaml", testmodels.ConfigZones)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("pipeline: {batch_size: 2}\n")
	f.Close()
	cfg, err := runconfig.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), cfg, Options{Sources: []camera.Source{camera.NewMailbox(), camera.NewMailbox(), camera.NewMailbox()}})
	if err == nil {
		t.Fatal("batch_size 2 on fixed-batch models was accepted")
	}
	for _, want := range []string{"pipeline.batch_size", filepath.Join(s.dir, "depth.onnx"), "fixed batch dimension", "didoedge model batch"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// The default on fixed models: one frame per run.
	p := newIdlePipeline(t, "quiet.yaml")
	if p.batch != 1 {
		t.Fatalf("fixed-batch models: batch %d, want 1", p.batch)
	}
	p2, err := newBatchedPipeline(t, "pipeline: {batch_size: 1}\n")
	if err != nil {
		t.Fatal(err)
	}
	if p2.batch != 1 {
		t.Fatalf("batch_size 1: batch %d", p2.batch)
	}
	// The default with the CPU provider alone: one frame per run, also on
	// dynamic-batch models.
	p3, err := newBatchedPipeline(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if p3.batch != 1 {
		t.Fatalf("dynamic-batch models on the CPU provider: default batch %d, want 1", p3.batch)
	}
	// A GPU provider that falls back to the CPU: the default batch follows
	// the provider the sessions run on, one frame per run (a CPU test: it
	// asserts that cuda cannot run here).
	if !onnxrt.NVIDIAGPUPresent() {
		p4, err := newBatchedPipelineEdit(t, func(s string) string {
			return strings.Replace(s, "providers: [{name: cpu}]", "providers: [{name: cuda}, {name: cpu}]", 1)
		})
		if err != nil {
			t.Fatal(err)
		}
		if p4.batch != 1 {
			t.Fatalf("cuda falling back to the cpu: default batch %d, want 1", p4.batch)
		}
	}
	if _, err := newBatchedPipeline(t, "pipeline: {batch_size: 17}\n"); err == nil || !strings.Contains(err.Error(), "pipeline.batch_size: 17") {
		t.Fatalf("batch_size 17: %v", err)
	}
}

// TestDefaultBatchSize: pipeline.batch_size 0 batches up to 4 cameras when
// a GPU provider is configured, anywhere in the fallback list, and runs one
// frame per run on the CPU provider alone.
func TestDefaultBatchSize(t *testing.T) {
	gpu := []onnxrt.ProviderConfig{{Name: onnxrt.ProviderTensorRT}, {Name: onnxrt.ProviderCUDA}, {Name: onnxrt.ProviderCPU}}
	for _, tc := range []struct {
		name      string
		providers []onnxrt.ProviderConfig
		cameras   int
		want      int
	}{
		{"default providers", nil, 3, 1},
		{"cpu", []onnxrt.ProviderConfig{{Name: onnxrt.ProviderCPU}}, 8, 1},
		{"tensorrt, cuda, cpu: 3 cameras", gpu, 3, 3},
		{"tensorrt, cuda, cpu: 8 cameras", gpu, 8, runconfig.DefaultMaxBatch},
		{"cpu then cuda", []onnxrt.ProviderConfig{{Name: onnxrt.ProviderCPU}, {Name: onnxrt.ProviderCUDA}}, 2, 2},
		{"cuda: 1 camera", []onnxrt.ProviderConfig{{Name: onnxrt.ProviderCUDA}}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg runconfig.Config
			cfg.Inference.Providers = tc.providers
			if got := cfg.DefaultBatchSize(tc.cameras); got != tc.want {
				t.Fatalf("DefaultBatchSize(%d) = %d, want %d", tc.cameras, got, tc.want)
			}
		})
	}
}
