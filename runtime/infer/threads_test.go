package infer

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// threadModes are the threading set-ups a user can configure, the first
// being ONNX Runtime's own default (each session its pool, spinning).
var threadModes = []struct {
	name string
	cfg  onnxrt.Config
}{
	{"session pools, spinning", onnxrt.Config{ThreadPool: onnxrt.ThreadPoolSession, ThreadSpinning: true}},
	{"session pools, no spinning", onnxrt.Config{ThreadPool: onnxrt.ThreadPoolSession}},
	{"global pool, no spinning (default)", onnxrt.Config{}},
	{"global pool, spinning", onnxrt.Config{ThreadPool: onnxrt.ThreadPoolGlobal, ThreadSpinning: true}},
}

// modelPair is a depth model and its AuxUE with their IO specs.
type modelPair struct {
	name                 string
	depth, aux           string
	depthSpec, auxueSpec IOSpec
}

func modelPairs(t testing.TB) []modelPair {
	t.Helper()
	f := testmodels.Write(t, t.TempDir())
	ds, err := ParseIOSpecKind([]byte(testmodels.DepthIOSpec), "depth.yaml", KindDepth)
	if err != nil {
		t.Fatal(err)
	}
	as, err := ParseIOSpecKind([]byte(testmodels.AuxUEIOSpec), "auxue.yaml", KindAuxUE)
	if err != nil {
		t.Fatal(err)
	}
	pairs := []modelPair{{"test models", f.Depth, f.AuxUE, ds, as}}
	// The committed reference models (models/, 192x640).
	dir := filepath.Join("..", "..", "models")
	rd, err := readSpecFile(filepath.Join(dir, "depth.yaml"), KindDepth)
	if err != nil {
		t.Fatal(err)
	}
	ra, err := readSpecFile(filepath.Join(dir, "auxue.yaml"), KindAuxUE)
	if err != nil {
		t.Fatal(err)
	}
	return append(pairs, modelPair{"reference models", filepath.Join(dir, "depth.onnx"), filepath.Join(dir, "auxue.onnx"), rd, ra})
}

func readSpecFile(path, kind string) (IOSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return IOSpec{}, err
	}
	return ParseIOSpecKind(data, path, kind)
}

// runPair runs the depth model on a fixed image, feeds the AuxUE the same
// image and the depth, and returns copies of every output of both.
func runPair(t *testing.T, p modelPair, cfg onnxrt.Config) [][]float32 {
	t.Helper()
	ctx := context.Background()
	depth := newSession(t, p.depth, p.depthSpec, cfg, nil)
	aux := newSession(t, p.aux, p.auxueSpec, cfg, nil)
	w, h := p.depthSpec.Input.Width, p.depthSpec.Input.Height
	pix := make([]byte, 3*w*h)
	for i := range pix {
		pix[i] = byte((i*37 + i/(3*w)*11) % 251)
	}
	if err := depth.SetImageRGB8(pix, w, h, 3*w); err != nil {
		t.Fatal(err)
	}
	if _, err := depth.Run(ctx); err != nil {
		t.Fatal(err)
	}
	copy(aux.InputAt(0), depth.Input())
	if _, err := depth.DepthInto(aux.InputAt(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := aux.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var outs [][]float32
	for _, s := range []*Session{depth, aux} {
		for i := range s.OutputNames() {
			outs = append(outs, append([]float32(nil), s.Output(i)...))
		}
	}
	if err := aux.Close(); err != nil {
		t.Fatal(err)
	}
	if err := depth.Close(); err != nil {
		t.Fatal(err)
	}
	return outs
}

// maxRelDiff is max |a-b| / max(1, |a|) over both slices.
func maxRelDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var m float64
	for i := range a {
		d := math.Abs(float64(a[i])-float64(b[i])) / math.Max(1, math.Abs(float64(a[i])))
		if !(d <= m) { // NaN counts as a difference
			m = d
			if math.IsNaN(d) {
				return math.Inf(1)
			}
		}
	}
	return m
}

// Every threading mode runs the same kernels with the same number of
// threads (2), so depth, scale and epistemic agree across modes; 1e-6
// leaves room for a float summation order that a thread pool may change.
func TestThreadModesGiveSameOutputs(t *testing.T) {
	for _, p := range modelPairs(t) {
		t.Run(p.name, func(t *testing.T) {
			var want [][]float32
			for i, m := range threadModes {
				cfg := m.cfg
				cfg.IntraOpThreads = 2
				got := runPair(t, p, cfg)
				if i == 0 {
					want = got
					continue
				}
				if len(got) != len(want) {
					t.Fatalf("%s: %d outputs, want %d", m.name, len(got), len(want))
				}
				for j := range got {
					if d := maxRelDiff(want[j], got[j]); d > 1e-6 {
						t.Errorf("%s: output %d differs from %s by %g", m.name, j, threadModes[0].name, d)
					}
				}
			}
		})
	}
}

// Sessions on the global pool run concurrently (several cameras) and still
// give the outputs of a lone run.
func TestGlobalPoolConcurrentRuns(t *testing.T) {
	p := modelPairs(t)[0]
	cfg := onnxrt.Config{IntraOpThreads: 2}
	want := runPair(t, p, cfg)
	var wg sync.WaitGroup
	results := make([][][]float32, 4)
	var mu sync.Mutex
	for g := range results {
		wg.Go(func() {
			out := runPairErr(p, cfg)
			mu.Lock()
			results[g] = out
			mu.Unlock()
		})
	}
	wg.Wait()
	for g, got := range results {
		if got == nil {
			t.Fatalf("goroutine %d failed", g)
		}
		for j := range got {
			if d := maxRelDiff(want[j], got[j]); d > 1e-6 {
				t.Errorf("goroutine %d: output %d differs from a lone run by %g", g, j, d)
			}
		}
	}
}

// runPairErr is runPair for goroutines: nil on any error.
func runPairErr(p modelPair, cfg onnxrt.Config) [][]float32 {
	ctx := context.Background()
	depth, err := NewSession(ctx, p.depth, p.depthSpec, cfg, nil)
	if err != nil {
		return nil
	}
	defer depth.Close()
	aux, err := NewSession(ctx, p.aux, p.auxueSpec, cfg, nil)
	if err != nil {
		return nil
	}
	defer aux.Close()
	w, h := p.depthSpec.Input.Width, p.depthSpec.Input.Height
	pix := make([]byte, 3*w*h)
	for i := range pix {
		pix[i] = byte((i*37 + i/(3*w)*11) % 251)
	}
	var outs [][]float32
	for range 20 { // many runs, so that the goroutines overlap
		if depth.SetImageRGB8(pix, w, h, 3*w) != nil {
			return nil
		}
		if _, err := depth.Run(ctx); err != nil {
			return nil
		}
		copy(aux.InputAt(0), depth.Input())
		if _, err := depth.DepthInto(aux.InputAt(1)); err != nil {
			return nil
		}
		if _, err := aux.Run(ctx); err != nil {
			return nil
		}
	}
	for _, s := range []*Session{depth, aux} {
		for i := range s.OutputNames() {
			outs = append(outs, append([]float32(nil), s.Output(i)...))
		}
	}
	return outs
}

// osThreads counts the process's threads (/proc/self/task).
func osThreads(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// The global pool is shared: with intra_op_threads 4 a session with its own
// pool starts 3 worker threads (the caller is the fourth), so 4 sessions
// start 12; on the global pool the environment starts 3 and further
// sessions start none. Go may start an OS thread of its own meanwhile,
// hence the slack of 2. Closing the last session joins the pool's threads.
func TestGlobalPoolShared(t *testing.T) {
	path := saveModel(t, affineModel(1, 2, 2, 1, 0))
	const intra, sessions = 4, 4
	open := func(cfg onnxrt.Config) (started []int, closeAll func()) {
		var ss []*Session
		before := osThreads(t)
		for range sessions {
			s, err := NewSession(context.Background(), path, spec(1, 2, 2, MeaningMetricDepth), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			ss = append(ss, s)
			now := osThreads(t)
			started = append(started, now-before)
			before = now
		}
		return started, func() {
			for _, s := range ss {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	own, closeOwn := open(onnxrt.Config{ThreadPool: onnxrt.ThreadPoolSession, IntraOpThreads: intra})
	closeOwn()
	for i, n := range own {
		if n < intra-1 {
			t.Errorf("session pools: session %d started %d threads, want at least %d", i, n, intra-1)
		}
	}

	base := osThreads(t)
	shared, closeShared := open(onnxrt.Config{ThreadPool: onnxrt.ThreadPoolGlobal, IntraOpThreads: intra})
	if shared[0] < intra-1 {
		t.Errorf("global pool: the first session started %d threads, want the pool's %d", shared[0], intra-1)
	}
	later := 0
	for _, n := range shared[1:] {
		later += n
	}
	if later > 2 {
		t.Errorf("global pool: sessions 2-%d started %d threads (%v), want none (at most 2 of Go's own)", sessions, later, shared)
	}
	closeShared()
	if after := osThreads(t); after > base+2 {
		t.Errorf("global pool: %d threads after closing every session, %d before: the pool's threads were not joined", after, base)
	}
}

// One process, one environment: a global pool cannot be added to an
// environment created without one, nor resized; sessions with their own
// pools fit any environment.
func TestGlobalPoolMismatch(t *testing.T) {
	path := saveModel(t, affineModel(1, 2, 2, 1, 0))
	sp := spec(1, 2, 2, MeaningMetricDepth)
	ctx := context.Background()

	own := newSession(t, path, sp, onnxrt.Config{ThreadPool: onnxrt.ThreadPoolSession}, nil)
	if _, err := NewSession(ctx, path, sp, onnxrt.Config{}, nil); err == nil || !strings.Contains(err.Error(), "thread_pool") ||
		!strings.Contains(err.Error(), "without a global thread pool") {
		t.Fatalf("global pool on an environment without one: err = %v", err)
	}
	if own.ThreadPool() != onnxrt.ThreadPoolSession {
		t.Fatalf("ThreadPool() = %q", own.ThreadPool())
	}
	if err := own.Close(); err != nil {
		t.Fatal(err)
	}

	g := newSession(t, path, sp, onnxrt.Config{IntraOpThreads: 2}, nil)
	if g.ThreadPool() != onnxrt.ThreadPoolGlobal {
		t.Fatalf("ThreadPool() = %q", g.ThreadPool())
	}
	for _, cfg := range []onnxrt.Config{{IntraOpThreads: 3}, {IntraOpThreads: 2, ThreadSpinning: true}} {
		_, err := NewSession(ctx, path, sp, cfg, nil)
		if err == nil || !strings.Contains(err.Error(), "intra_op_threads 2, thread_spinning false") {
			t.Errorf("%+v on a pool of 2 threads without spinning: err = %v", cfg, err)
		}
	}
	mixed := newSession(t, path, sp, onnxrt.Config{ThreadPool: onnxrt.ThreadPoolSession, ThreadSpinning: true}, nil)
	if _, err := mixed.Run(ctx); err != nil {
		t.Fatalf("session pool beside the global one: %v", err)
	}
	same := newSession(t, path, sp, onnxrt.Config{IntraOpThreads: 2}, nil)
	if _, err := same.Run(ctx); err != nil {
		t.Fatal(err)
	}
}
