package infer

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// dynamicCopy writes a copy of the model at path with a dynamic batch
// dimension (onnx.DynamicBatch, what `didoedge model batch` runs).
func dynamicCopy(t testing.TB, path string) string {
	t.Helper()
	m, err := onnx.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := onnx.DynamicBatch(m, ""); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := onnx.WriteFile(out, m); err != nil {
		t.Fatal(err)
	}
	return out
}

// batchFrames are n RGB8 frames of different content and sizes (the
// cameras of one batch need not share a frame size).
func batchFrames(n, w, h int) (frames [][]uint8, ws, hs []int) {
	for k := range n {
		fw, fh := w+8*k, h+4*(k%2)
		pix := make([]uint8, 3*fw*fh)
		for i := range pix {
			pix[i] = uint8((i*(31+k*6) + (i/(3*fw))*(7+k)) % 251)
		}
		frames, ws, hs = append(frames, pix), append(ws, fw), append(hs, fh)
	}
	return frames, ws, hs
}

// openPair opens a depth + AuxUE pair with the given batch size.
func openPair(t testing.TB, p modelPair, batch int) *Models {
	t.Helper()
	m, err := OpenModels(context.Background(), ModelsConfig{Depth: p.depth, DepthSpec: p.depthSpec, AuxUE: p.aux, AuxUESpec: p.auxueSpec,
		Inference: onnxrt.Config{IntraOpThreads: 1}, BatchSize: batch}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// Batched inference equals per-frame inference to 1e-5 (relative, or
// absolute below 1) on the test models and on the reference models of
// models/, made dynamic by DynamicBatch: depth, Laplace scale and K/S of
// each of 3 frames of different sizes, against the original fixed-batch
// models run one frame at a time. A partial batch (2 of 3) too.
func TestBatchEqualsPerFrame(t *testing.T) {
	const n = 3
	ctx := context.Background()
	for _, p := range modelPairs(t) {
		t.Run(p.name, func(t *testing.T) {
			single := openPair(t, p, 1)
			dp := p
			dp.depth, dp.aux = dynamicCopy(t, p.depth), dynamicCopy(t, p.aux)
			batched := openPair(t, dp, n)
			if got := batched.MaxBatch(); got != n {
				t.Fatalf("MaxBatch %d, want %d", got, n)
			}
			frames, ws, hs := batchFrames(n, p.depthSpec.Input.Width, p.depthSpec.Input.Height)
			var want [][3][]float32
			for k := range n {
				maps, err := single.Infer(ctx, frames[k], ws[k], hs[k])
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, [3][]float32{clone(maps.Depth), clone(maps.Scale), clone(maps.Epistemic)})
			}
			views := []*Models{batched}
			for range n - 1 {
				v, err := batched.Share()
				if err != nil {
					t.Fatal(err)
				}
				views = append(views, v)
			}
			staged := make([]*Staged, n)
			for k := range n {
				staged[k] = batched.NewStaged()
				if err := batched.Stage(staged[k], frames[k], ws[k], hs[k]); err != nil {
					t.Fatal(err)
				}
			}
			check := func(size int) {
				var tm StageTimes
				if err := batched.InferBatch(ctx, views[:size], staged[:size], &tm); err != nil {
					t.Fatal(err)
				}
				for k := range size {
					maps, img, err := views[k].Result()
					if err != nil {
						t.Fatal(err)
					}
					if maps.Width != ws[k] || maps.Height != hs[k] || len(img) != 3*p.depthSpec.Input.Width*p.depthSpec.Input.Height {
						t.Fatalf("batch %d frame %d: maps %dx%d, image %d bytes", size, k, maps.Width, maps.Height, len(img))
					}
					for j, got := range [][]float32{maps.Depth, maps.Scale, maps.Epistemic} {
						if d := maxRelDiff(want[k][j], got); d > 1e-5 {
							t.Errorf("batch %d frame %d map %d: differs from the per-frame run by %g", size, k, j, d)
						}
					}
				}
			}
			check(n)
			check(2)
			check(1)
		})
	}
}

func clone(x []float32) []float32 { return append([]float32(nil), x...) }

// A batch size above 1 on a fixed-batch model is refused with an error
// naming the model file and the command that makes it dynamic; as a
// default (BatchIfDynamic) it opens with one frame per run.
func TestBatchSizeOnFixedModel(t *testing.T) {
	p := modelPairs(t)[0]
	_, err := OpenModels(context.Background(), ModelsConfig{Depth: p.depth, DepthSpec: p.depthSpec, AuxUE: p.aux, AuxUESpec: p.auxueSpec,
		Inference: onnxrt.Config{IntraOpThreads: 1}, BatchSize: 4}, nil)
	if err == nil {
		t.Fatal("batch size 4 on a fixed-batch model was accepted")
	}
	for _, want := range []string{"batch size 4", p.depth, "fixed batch dimension", "didoedge model batch"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	m, err := OpenModels(context.Background(), ModelsConfig{Depth: p.depth, DepthSpec: p.depthSpec, AuxUE: p.aux, AuxUESpec: p.auxueSpec,
		Inference: onnxrt.Config{IntraOpThreads: 1}, BatchSize: 4, BatchIfDynamic: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.MaxBatch() != 1 || m.DepthSession().DynamicBatch() {
		t.Fatalf("MaxBatch %d, dynamic %v; want 1, false", m.MaxBatch(), m.DepthSession().DynamicBatch())
	}
	var tm StageTimes
	st := m.NewStaged()
	frames, ws, hs := batchFrames(2, testmodels.Width, testmodels.Height)
	if err := m.Stage(st, frames[0], ws[0], hs[0]); err != nil {
		t.Fatal(err)
	}
	v, _ := m.Share()
	if err := m.InferBatch(context.Background(), []*Models{m, v}, []*Staged{st, st}, &tm); err == nil {
		t.Fatal("a batch of 2 ran on batch-1 sessions")
	}
}

// foreignBatchScript builds, with Debian's python3-onnx (not the
// project's exporter), a depth model with a symbolic batch "batch":
// Conv 3->4 (3x3, pad 1, seeded weights), Relu, Conv 4->1 (1x1), Softplus
// + 0.5 as metric depth (N,1,H,W), and a second output "feat" of the
// Relu, so that a batch of outputs of different shapes is read slot by
// slot.
const foreignBatchScript = `
import sys, onnx
from onnx import helper, TensorProto, numpy_helper
import numpy as np
out, h, w = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(11)
w1 = numpy_helper.from_array(rng.normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32), "w1")
b1 = numpy_helper.from_array(rng.normal(0, 0.1, (4,)).astype(np.float32), "b1")
w2 = numpy_helper.from_array(rng.normal(0, 0.3, (1, 4, 1, 1)).astype(np.float32), "w2")
half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c1"], ["feat"]),
    helper.make_node("Conv", ["feat", "w2"], ["c2"]),
    helper.make_node("Softplus", ["c2"], ["sp"]),
    helper.make_node("Add", ["sp", "half"], ["depth"]),
]
g = helper.make_graph(nodes, "foreign_batch",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, h, w])],
    [helper.make_tensor_value_info("depth", TensorProto.FLOAT, ["batch", 1, h, w]),
     helper.make_tensor_value_info("feat", TensorProto.FLOAT, ["batch", 4, h, w])],
    initializer=[w1, b1, w2, half])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="python3-onnx test")
m.ir_version = 8
onnx.checker.check_model(m, full_check=True)
onnx.save(m, out)
`

// A foreign model with a dynamic batch (built by python3-onnx): a batch
// of 4 frames gives each frame's depth and features as 4 runs of one
// frame do, to 1e-5, and the session's batch sizes 1..4 all work.
func TestForeignDynamicBatch(t *testing.T) {
	if _, err := os.Stat(testmodels.Python); err != nil {
		t.Fatalf("python3-onnx: %v (run scripts/deps.sh)", err)
	}
	const h, w, n = 12, 20, 4
	path := filepath.Join(t.TempDir(), "foreign.onnx")
	if out, err := exec.Command(testmodels.Python, "-c", foreignBatchScript, path, "12", "20").CombinedOutput(); err != nil {
		t.Fatalf("python3-onnx: %v\n%s", err, out)
	}
	sp := IOSpec{Input: InputSpec{Name: "x", Height: h, Width: w}, Depth: OutputSpec{Name: "depth", Meaning: MeaningMetricDepth},
		Features: []FeatureSpec{{Name: "feat"}}}
	ctx := context.Background()
	one := newSession(t, path, sp, onnxrt.Config{IntraOpThreads: 1}, nil)
	batch, err := OpenSession(ctx, path, sp, onnxrt.Config{IntraOpThreads: 1}, SessionOptions{MaxBatch: n}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Close()
	if !batch.DynamicBatch() || batch.MaxBatch() != n {
		t.Fatalf("dynamic %v, MaxBatch %d", batch.DynamicBatch(), batch.MaxBatch())
	}
	frames, _, _ := batchFrames(n, w, h)
	var want [][2][]float32
	for k := range n {
		pix := frames[k][:3*w*h]
		if err := one.SetImageRGB8(pix, w, h, 3*w); err != nil {
			t.Fatal(err)
		}
		if _, err := one.Run(ctx); err != nil {
			t.Fatal(err)
		}
		want = append(want, [2][]float32{clone(one.Output(0)), clone(one.Output(1))})
		if err := batch.ImageInto(batch.InputSlot(0, k), pix, w, h, 3*w); err != nil {
			t.Fatal(err)
		}
	}
	for size := n; size >= 1; size-- {
		fr, err := batch.RunBatch(ctx, size)
		if err != nil {
			t.Fatal(err)
		}
		if len(fr.SlotValid) != size || !fr.Valid {
			t.Fatalf("batch %d: frame %+v", size, fr)
		}
		for k := range size {
			for i := range 2 {
				if d := maxRelDiff(want[k][i], batch.OutputSlot(i, k)); d > 1e-5 {
					t.Errorf("batch %d frame %d output %d: differs from the single run by %g", size, k, i, d)
				}
			}
		}
	}
	if _, err := batch.RunBatch(ctx, n+1); err == nil {
		t.Error("a batch larger than the session's ran")
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := batch.RunBatch(ctx, 3); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("RunBatch allocates %.1f times per run", allocs)
	}
}

// twoViews opens the test models made dynamic at batch size 2 and a second
// view of them, with a staged buffer and a frame of its own size each.
func twoViews(t *testing.T) (views []*Models, st []*Staged, frames [][]uint8, ws, hs []int) {
	t.Helper()
	p := modelPairs(t)[0]
	p.depth, p.aux = dynamicCopy(t, p.depth), dynamicCopy(t, p.aux)
	m := openPair(t, p, 2)
	v, err := m.Share()
	if err != nil {
		t.Fatal(err)
	}
	frames, ws, hs = batchFrames(2, testmodels.Width, testmodels.Height)
	return []*Models{m, v}, []*Staged{m.NewStaged(), m.NewStaged()}, frames, ws, hs
}

// InferBatch allocates nothing once every view knows its frame size.
func TestInferBatchAllocatesNothing(t *testing.T) {
	views, st, frames, ws, hs := twoViews(t)
	m := views[0]
	ctx := context.Background()
	var tm StageTimes
	run := func() {
		for k := range 2 {
			if err := m.Stage(st[k], frames[k], ws[k], hs[k]); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.InferBatch(ctx, views, st, &tm); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if allocs := testing.AllocsPerRun(10, run); allocs != 0 {
		t.Errorf("Stage + InferBatch allocate %.1f times per batch", allocs)
	}
}

// BenchmarkBatchReference runs the reference models (models/, 192x640)
// as shipped (fixed batch 1) and made dynamic (DynamicBatch), interleaved
// round by round: "fixed" and "dynamic b1" one frame per run on a batch-1
// session, "dynamic b4 n1" one frame on a batch-4 session (the IoBinding
// path), "dynamic b4 n4" four frames per run. ns/frame per set-up.
//
//	go test -c -o /tmp/infer.test ./runtime/infer && cd runtime/infer &&
//	flock /tmp/didoedge-heavy.lock /tmp/infer.test -test.run '^$' -test.bench BatchReference -test.benchtime 20x
func BenchmarkBatchReference(b *testing.B) {
	p := modelPairs(b)[1]
	dp := p
	dp.depth, dp.aux = dynamicCopy(b, p.depth), dynamicCopy(b, p.aux)
	type setup struct {
		name  string
		m     *Models
		n     int
		views []*Models
		st    []*Staged
		total time.Duration
		count int
	}
	open := func(name string, pair modelPair, batch, n int) *setup {
		m, err := OpenModels(context.Background(), ModelsConfig{Depth: pair.depth, DepthSpec: pair.depthSpec, AuxUE: pair.aux, AuxUESpec: pair.auxueSpec,
			BatchSize: batch}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { m.Close() })
		s := &setup{name: name, m: m, n: n, views: []*Models{m}}
		for len(s.views) < n {
			v, _ := m.Share()
			s.views = append(s.views, v)
		}
		frames, ws, hs := batchFrames(n, pair.depthSpec.Input.Width, pair.depthSpec.Input.Height)
		for k := range n {
			st := m.NewStaged()
			if err := m.Stage(st, frames[k][:3*pair.depthSpec.Input.Width*pair.depthSpec.Input.Height], pair.depthSpec.Input.Width, pair.depthSpec.Input.Height); err != nil {
				b.Fatal(err)
			}
			_, _ = ws, hs
			s.st = append(s.st, st)
		}
		return s
	}
	setups := []*setup{open("fixed", p, 1, 1), open("dynamic b1", dp, 1, 1), open("dynamic b4 n1", dp, 4, 1), open("dynamic b4 n4", dp, 4, 4)}
	ctx := context.Background()
	var tm StageTimes
	for _, s := range setups { // warm-up
		if err := s.m.InferBatch(ctx, s.views, s.st, &tm); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		for _, s := range setups {
			t0 := time.Now()
			if err := s.m.InferBatch(ctx, s.views, s.st, &tm); err != nil {
				b.Fatal(err)
			}
			s.total += time.Since(t0)
			s.count += s.n
		}
	}
	for _, s := range setups {
		b.ReportMetric(float64(s.total.Microseconds())/float64(max(s.count, 1))/1000, strings.ReplaceAll(s.name, " ", "_")+"-ms/frame")
	}
}

// A dynamic-batch session asks TensorRT for one optimization profile from
// 1 frame to the batch size over every input (image and depth for the
// reference AuxUE), so that a partial batch never triggers an engine
// rebuild; its engine cache directory names the range. The session
// itself falls back to the CPU here (no TensorRT on this machine).
func TestTensorRTBatchProfile(t *testing.T) {
	skipWithGPU(t)
	ref := modelPairs(t)[1]
	aux := dynamicCopy(t, ref.aux)
	cache := t.TempDir()
	cfg := onnxrt.Config{IntraOpThreads: 1, Providers: []onnxrt.ProviderConfig{
		{Name: onnxrt.ProviderTensorRT, FP16: true, EngineCacheDir: cache}, {Name: onnxrt.ProviderCPU}}}
	s, err := OpenSession(context.Background(), aux, ref.auxueSpec, cfg, SessionOptions{MaxBatch: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Provider() != onnxrt.ProviderCPU {
		t.Fatalf("provider %q, want the cpu fallback", s.Provider())
	}
	o := s.profile(s.MaxBatch()).Options()
	want := map[string]string{
		"trt_profile_min_shapes": "image:1x3x192x640,depth:1x1x192x640",
		"trt_profile_opt_shapes": "image:3x3x192x640,depth:3x1x192x640",
		"trt_profile_max_shapes": "image:3x3x192x640,depth:3x1x192x640",
	}
	if !maps.Equal(o, want) {
		t.Fatalf("profile options\n got %v\nwant %v", o, want)
	}
	sha := strings.Repeat("cd", 32)
	trt, err := onnxrt.TensorRTOptions(cfg.Providers[0], sha, []int64{3, 3, 192, 640}, s.profile(s.MaxBatch()))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if trt[k] != v {
			t.Fatalf("tensorrt option %s = %q, want %q", k, trt[k], v)
		}
	}
	if dir := filepath.Join(cache, "cdcdcdcdcdcdcdcd_fp16_3x3x192x640_b1-3"); trt["trt_engine_cache_path"] != dir || !fileExists(dir) {
		t.Fatalf("engine cache path %q, want %q (created)", trt["trt_engine_cache_path"], dir)
	}
	fixed, err := onnxrt.TensorRTOptions(cfg.Providers[0], sha, []int64{1, 3, 192, 640}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fixed["trt_profile_min_shapes"]; ok {
		t.Fatalf("a fixed-shape session got a profile: %v", fixed)
	}
}

// A frame staged straight into the sessions' input slot (StageDirect)
// gives bit for bit the maps of the same frame staged into its own buffer
// and copied (Stage), on the test and reference models, at the frame
// sizes of batchFrames (letterboxed or not); it allocates nothing, and a
// batch of two refuses it.
func TestStageDirectEqualsCopy(t *testing.T) {
	ctx := context.Background()
	for _, p := range modelPairs(t) {
		t.Run(p.name, func(t *testing.T) {
			w, h := p.depthSpec.Input.Width, p.depthSpec.Input.Height
			m := openPair(t, p, 1)
			frames, ws, hs := batchFrames(3, w, h)
			st := m.NewStaged()
			var tm StageTimes
			for k := range frames {
				if err := m.Stage(st, frames[k], ws[k], hs[k]); err != nil {
					t.Fatal(err)
				}
				if err := m.InferBatch(ctx, []*Models{m}, []*Staged{st}, &tm); err != nil {
					t.Fatal(err)
				}
				want, _, err := m.Result()
				if err != nil {
					t.Fatal(err)
				}
				want = Maps{Depth: clone(want.Depth), Scale: clone(want.Scale), Epistemic: clone(want.Epistemic)}
				clear(m.DepthSession().InputSlot(0, 0)) // nothing of the copy stays
				if err := m.StageDirect(st, frames[k], ws[k], hs[k]); err != nil {
					t.Fatal(err)
				}
				if !st.Direct() {
					t.Fatal("StageDirect did not mark the frame")
				}
				if err := m.InferBatch(ctx, []*Models{m}, []*Staged{st}, &tm); err != nil {
					t.Fatal(err)
				}
				got, _, err := m.Result()
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range []struct {
					name      string
					got, want []float32
				}{{"depth", got.Depth, want.Depth}, {"scale", got.Scale, want.Scale}, {"epistemic", got.Epistemic, want.Epistemic}} {
					if !slices.Equal(c.got, c.want) {
						t.Fatalf("frame %d (%dx%d): %s differs between direct and copied staging", k, ws[k], hs[k], c.name)
					}
				}
			}
			run := func() {
				if err := m.StageDirect(st, frames[0], ws[0], hs[0]); err != nil {
					t.Fatal(err)
				}
				if err := m.InferBatch(ctx, []*Models{m}, []*Staged{st}, &tm); err != nil {
					t.Fatal(err)
				}
			}
			if allocs := testing.AllocsPerRun(5, run); allocs != 0 {
				t.Errorf("StageDirect + InferBatch allocate %.1f times per frame", allocs)
			}
		})
	}
	views, st, frames, ws, hs := twoViews(t)
	m := views[0]
	if err := m.StageDirect(st[0], frames[0], ws[0], hs[0]); err != nil {
		t.Fatal(err)
	}
	if err := m.Stage(st[1], frames[1], ws[1], hs[1]); err != nil {
		t.Fatal(err)
	}
	var tm StageTimes
	if err := m.InferBatch(ctx, views, st, &tm); err == nil || !strings.Contains(err.Error(), "directly") {
		t.Fatalf("a direct frame in a batch of 2: %v, want an error", err)
	}
}
