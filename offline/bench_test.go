package offline

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/offline/depthtrain"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// benchSessions opens the committed reference models as runtime/infer
// sessions on the CPU provider with their IO specs and the default
// threading, runs the depth model on a simulated frame and feeds the AuxUE
// its image input and depth. The sessions close when b ends.
func benchSessions(b *testing.B, ensemble int) (depth []*infer.Session, aux *infer.Session) {
	depth, aux, closeAll := openBenchSessions(b, ensemble, onnxrt.Config{})
	b.Cleanup(closeAll)
	return depth, aux
}

// openBenchSessions is benchSessions with the inference config cfg; the
// caller closes the sessions with closeAll.
func openBenchSessions(b *testing.B, ensemble int, cfg onnxrt.Config) (depth []*infer.Session, aux *infer.Session, closeAll func()) {
	dir := filepath.Join("..", "models")
	spec, err := ReadSpec(filepath.Join(dir, "depth.yaml"), infer.KindDepth)
	if err != nil {
		b.Skipf("reference models not built: %v", err)
	}
	auxSpec, err := ReadSpec(filepath.Join(dir, "auxue.yaml"), infer.KindAuxUE)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var all []*infer.Session
	closeAll = func() {
		for _, s := range all {
			if err := s.Close(); err != nil {
				b.Error(err)
			}
		}
	}
	for i := 0; i < ensemble; i++ {
		s, err := infer.NewSession(ctx, filepath.Join(dir, "depth.onnx"), spec, cfg, nil)
		if err != nil {
			closeAll()
			b.Fatal(err)
		}
		all = append(all, s)
		depth = append(depth, s)
	}
	aux, err = infer.NewSession(ctx, filepath.Join(dir, "auxue.onnx"), auxSpec, cfg, nil)
	if err != nil {
		closeAll()
		b.Fatal(err)
	}
	all = append(all, aux)
	// Realistic inputs: a simulated frame and its predicted depth.
	src, err := depthtrain.NewSimSource(424242, 1, 10, spec.Input.Width, spec.Input.Height)
	if err != nil {
		closeAll()
		b.Fatal(err)
	}
	f, err := src.Render(0, 3)
	if err != nil {
		closeAll()
		b.Fatal(err)
	}
	for _, s := range depth {
		if err := s.SetImageRGB8(f.RGB, f.Width, f.Height, f.Width*3); err != nil {
			closeAll()
			b.Fatal(err)
		}
	}
	if _, err := depth[0].Run(ctx); err != nil {
		closeAll()
		b.Fatal(err)
	}
	copy(aux.InputAt(0), depth[0].Input())
	if _, err := depth[0].DepthInto(aux.InputAt(1)); err != nil {
		closeAll()
		b.Fatal(err)
	}
	return depth, aux, closeAll
}

// BenchmarkReferenceModels times, in one interleaved run at 192x640 on the
// CPU provider, the depth model, the AuxUE, and a 3-member deep ensemble
// (three depth sessions), and reports the AuxUE/depth and ensemble/depth
// ratios. ns/op is one iteration of all five runs.
func BenchmarkReferenceModels(b *testing.B) {
	depth, aux := benchSessions(b, 3)
	ctx := context.Background()
	var tDepth, tAux, tEns time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := depth[0].Run(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := aux.Run(ctx); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		for _, s := range depth {
			if _, err := s.Run(ctx); err != nil {
				b.Fatal(err)
			}
		}
		t3 := time.Now()
		tDepth += t1.Sub(t0)
		tAux += t2.Sub(t1)
		tEns += t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(tDepth.Seconds()*1000/n, "depth-ms")
	b.ReportMetric(tAux.Seconds()*1000/n, "auxue-ms")
	b.ReportMetric(tEns.Seconds()*1000/n, "ensemble3-ms")
	b.ReportMetric(tAux.Seconds()/tDepth.Seconds(), "auxue/depth")
	b.ReportMetric(tEns.Seconds()/tDepth.Seconds(), "ensemble3/depth")
}

// BenchmarkDepth, BenchmarkAuxUE and BenchmarkEnsemble3 time each alone
// (with -benchmem: the frame path allocates nothing).
func BenchmarkDepth(b *testing.B) {
	depth, _ := benchSessions(b, 1)
	benchRun(b, depth...)
}

func BenchmarkAuxUE(b *testing.B) {
	_, aux := benchSessions(b, 1)
	benchRun(b, aux)
}

func BenchmarkEnsemble3(b *testing.B) {
	depth, _ := benchSessions(b, 3)
	benchRun(b, depth...)
}

func benchRun(b *testing.B, ss ...*infer.Session) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, s := range ss {
			if _, err := s.Run(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// threadModes are the ONNX Runtime threading set-ups BenchmarkThreadModes
// compares; the first is ONNX Runtime's own default (the runtime's before
// thread_pool and thread_spinning existed).
var threadModes = []struct {
	tag string
	cfg onnxrt.Config
}{
	{"own-spin", onnxrt.Config{ThreadPool: onnxrt.ThreadPoolSession, ThreadSpinning: true}},
	{"own-nospin", onnxrt.Config{ThreadPool: onnxrt.ThreadPoolSession}},
	{"global-nospin", onnxrt.Config{}},
	{"global-spin", onnxrt.Config{ThreadPool: onnxrt.ThreadPoolGlobal, ThreadSpinning: true}},
	{"1thread", onnxrt.Config{IntraOpThreads: 1}},
}

// BenchmarkThreadModes times, per threading mode, one iteration of the
// reference models in one process (as BenchmarkReferenceModels: the depth
// model, the AuxUE, then every depth session of the ensemble) with 1 depth
// session + the AuxUE (the pipeline: 2 sessions) and with a 3-member
// ensemble + the AuxUE (4 sessions). One op is a round through every
// configuration: open its sessions (one process holds one threading set-up
// at a time), run 1 warm-up and threadIters timed iterations, close. Rounds
// interleave the modes so that a shared machine's load drifts over all of
// them alike. Then threadIters more iterations run every session of the
// configuration at once, one goroutine each (cameras served in parallel, an
// ensemble run in parallel), timed until the last finishes. Metrics: ms per
// iteration, named <sessions>-<mode>-depth-ms, -auxue-ms, -ens3-ms and
// -concurrent-ms (modes: threadModes' tags).
func BenchmarkThreadModes(b *testing.B) {
	const threadIters = 5
	sizes := []int{1, 3}
	type key struct{ size, mode int }
	type times struct{ depth, aux, ens, par time.Duration }
	sum := map[key]*times{}
	ctx := context.Background()
	run := func(s *infer.Session) {
		if _, err := s.Run(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < b.N; i++ {
		for _, size := range sizes {
			for m, mode := range threadModes {
				b.StopTimer()
				depth, aux, closeAll := openBenchSessions(b, size, mode.cfg)
				for _, s := range depth {
					run(s)
				}
				run(aux)
				b.StartTimer()
				t := sum[key{size, m}]
				if t == nil {
					t = &times{}
					sum[key{size, m}] = t
				}
				for range threadIters {
					t0 := time.Now()
					run(depth[0])
					t1 := time.Now()
					run(aux)
					t2 := time.Now()
					for _, s := range depth {
						run(s)
					}
					t3 := time.Now()
					t.depth += t1.Sub(t0)
					t.aux += t2.Sub(t1)
					t.ens += t3.Sub(t2)
				}
				all := append(append([]*infer.Session(nil), depth...), aux)
				for range threadIters {
					t0 := time.Now()
					var wg sync.WaitGroup
					for _, s := range all {
						wg.Go(func() { run(s) })
					}
					wg.Wait()
					t.par += time.Since(t0)
				}
				b.StopTimer()
				closeAll()
				b.StartTimer()
			}
		}
	}
	n := float64(b.N * threadIters)
	ms := func(d time.Duration) float64 { return d.Seconds() * 1000 / n }
	for _, size := range sizes {
		for m, mode := range threadModes {
			t := sum[key{size, m}]
			tag := fmt.Sprintf("%d-%s-", size+1, mode.tag)
			b.ReportMetric(ms(t.depth), tag+"depth-ms")
			b.ReportMetric(ms(t.aux), tag+"auxue-ms")
			b.ReportMetric(ms(t.par), tag+"concurrent-ms")
			if size == 3 {
				b.ReportMetric(ms(t.ens), tag+"ens3-ms")
			}
		}
	}
}

// BenchmarkForeignModelFeatures times the MiDaS-like foreign model of the
// byo walkthrough (internal/testmodels.Foreign around models/depth.onnx)
// with an AuxUE of the default recipe's architecture, without and with
// the depth model's feature tensor chosen automatically (relu_7, 32 x 24
// x 80), interleaved frame by frame on a 320x96 frame through
// infer.Models (CPU provider): the depth model's run (with the tensor
// exposed as an extra output in the second case) and the AuxUE's run.
// The AuxUEs are untrained: a run's cost does not depend on the weights.
func BenchmarkForeignModelFeatures(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	model, specPath := testmodels.Foreign(b, "midas", filepath.Join("..", "models", "depth.onnx"), dir)
	spec, err := ReadSpec(specPath, infer.KindDepth)
	if err != nil {
		b.Fatal(err)
	}
	rc := DefaultAuxTrainConfig()
	base, err := AuxContract(spec, rc.Factor, rc.GlobalContextBands, rc.MaxDepth, true)
	if err != nil {
		b.Fatal(err)
	}
	fc, ok, err := ChooseFeatureTensor(model, spec, "")
	if err != nil || !ok {
		b.Fatalf("feature tensor: %v %v", ok, err)
	}
	with := base
	if with.Model, err = auxue.NewModelFeatures(fc.Tensor, fc.Channels, fc.Height, fc.Width, 0, 1); err != nil {
		b.Fatal(err)
	}
	with.Model.Mean, with.Model.Std = make([]float32, with.Model.Out), make([]float32, with.Model.Out)
	for i := range with.Model.Std {
		with.Model.Std[i] = 1
	}
	var pairs [2]*infer.Models
	for i, c := range []auxue.InputContract{base, with} {
		m, err := auxue.NewModel(rc.AuxModelConfig(c.Channels()))
		if err != nil {
			b.Fatal(err)
		}
		ap, as, err := WriteAuxArtifacts(m, c, spec, infer.AuxUEInfo{}, dir, fmt.Sprintf("auxue%d", i))
		if err != nil {
			b.Fatal(err)
		}
		if pairs[i], err = OpenModelPair(ctx, model, specPath, ap, as, onnxrt.Config{}, nil); err != nil {
			b.Fatal(err)
		}
		defer pairs[i].Close()
	}
	src, err := depthtrain.NewSimSource(5, 1, 4, 320, 96)
	if err != nil {
		b.Fatal(err)
	}
	fr, err := src.Render(0, 1)
	if err != nil {
		b.Fatal(err)
	}
	var depth, aux [2]time.Duration
	for i := 0; i < b.N+3; i++ {
		for k, p := range pairs {
			var st infer.StageTimes
			if _, _, err := p.InferTimed(ctx, fr.RGB, 320, 96, &st); err != nil {
				b.Fatal(err)
			}
			if i >= 3 { // warm-up
				depth[k] += st.Depth
				aux[k] += st.AuxUE
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(depth[0].Seconds()*1000/n, "depth-ms")
	b.ReportMetric(aux[0].Seconds()*1000/n, "auxue-ms")
	b.ReportMetric(depth[1].Seconds()*1000/n, "depth+exposed-ms")
	b.ReportMetric(aux[1].Seconds()*1000/n, "auxue+features-ms")
}
