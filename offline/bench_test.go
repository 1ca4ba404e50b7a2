package offline

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/didoedge/didoedge/runtime/infer"
)

// benchSessions opens the committed reference models as runtime/infer
// sessions on the CPU provider with their IO specs, runs the depth model
// on a simulated frame and feeds the AuxUE its image input and depth.
func benchSessions(b *testing.B, ensemble int) (depth []*infer.Session, aux *infer.Session) {
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
	for i := 0; i < ensemble; i++ {
		s, err := infer.NewSession(ctx, filepath.Join(dir, "depth.onnx"), spec, infer.Config{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		depth = append(depth, s)
	}
	aux, err = infer.NewSession(ctx, filepath.Join(dir, "auxue.onnx"), auxSpec, infer.Config{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { aux.Close() })
	// Realistic inputs: a simulated frame and its predicted depth.
	src, err := NewSimSource(424242, 1, 10, spec.Input.Width, spec.Input.Height)
	if err != nil {
		b.Fatal(err)
	}
	f, err := src.Render(0, 3)
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range depth {
		if err := s.SetImageRGB8(f.RGB, f.Width, f.Height, f.Width*3); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := depth[0].Run(ctx); err != nil {
		b.Fatal(err)
	}
	copy(aux.InputAt(0), depth[0].Input())
	if _, err := depth[0].DepthInto(aux.InputAt(1)); err != nil {
		b.Fatal(err)
	}
	return depth, aux
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
