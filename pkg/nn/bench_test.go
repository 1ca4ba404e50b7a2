package nn

import (
	"fmt"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gorgonia.org/tensor"
)

type convBenchShape struct {
	name          string
	n, c, o, h, w int
	k, s, p       int
}

var convBenchShapes = []convBenchShape{
	{"3x3_32to32_48x160_b4", 4, 32, 32, 48, 160, 3, 1, 1},
	// A decoder stage of the depth AuxUE: 64 -> 64 channels at a quarter of 192x640.
	{"3x3_64to64_48x160_b2", 2, 64, 64, 48, 160, 3, 1, 1},
}

func (s convBenchShape) flops() float64 {
	// Forward, weight gradient and input gradient are three GEMMs of
	// 2·Out·(In·K·K)·(Ho·Wo) flops per image each.
	ho, wo := s.outSize()
	return 3 * 2 * float64(s.n*s.o*s.c*s.k*s.k*ho*wo)
}

func (s convBenchShape) outSize() (int, int) {
	return Conv2dConfig{Kernel: s.k, Stride: s.s, Padding: s.p, Dilation: 1}.OutputSize(s.h, s.w)
}

func newBenchConv(b *testing.B, s convBenchShape) (*Conv2d, *convBenchData) {
	c, err := NewConv2d(Conv2dConfig{In: s.c, Out: s.o, Kernel: s.k, Stride: s.s, Padding: s.p, Bias: true}, testRNG(1))
	if err != nil {
		b.Fatal(err)
	}
	x := randDense(testRNG(2), -1, 1, s.n, s.c, s.h, s.w)
	ho, wo := s.outSize()
	dy := randDense(testRNG(3), -1, 1, s.n, s.o, ho, wo)
	return c, &convBenchData{x: x, dy: dy}
}

func convStep(b *testing.B, c *Conv2d, d *convBenchData) {
	if _, err := c.Forward(d.x, Train); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Backward(d.dy); err != nil {
		b.Fatal(err)
	}
}

// sgemmStep runs the three GEMMs of a convolution step with gonum's blas32
// (parallel) Sgemm on already-unfolded matrices: the reference.
type sgemmOperands struct {
	w, cols, y, dw, dcols blas32.General
}

func newSgemmOperands(s convBenchShape) *sgemmOperands {
	ckk, p := s.c*s.k*s.k, s.h*s.w
	g := func(r, c int) blas32.General {
		m := blas32.General{Rows: r, Cols: c, Stride: c, Data: make([]float32, r*c)}
		rng := testRNG(uint64(r*c + 1))
		for i := range m.Data {
			m.Data[i] = rng.Float32() - 0.5
		}
		return m
	}
	return &sgemmOperands{w: g(s.o, ckk), cols: g(ckk, p), y: g(s.o, p), dw: g(s.o, ckk), dcols: g(ckk, p)}
}

func (o *sgemmOperands) step(n int) {
	for i := 0; i < n; i++ {
		blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, o.w, o.cols, 0, o.y) // y = W·cols
		blas32.Gemm(blas.NoTrans, blas.Trans, 1, o.y, o.cols, 1, o.dw)  // dW += dy·colsᵀ
		blas32.Gemm(blas.Trans, blas.NoTrans, 1, o.w, o.y, 0, o.dcols)  // dcols = Wᵀ·dy
	}
}

// convBenchData bundles a benchmark's input and output gradient.
type convBenchData struct{ x, dy *tensor.Dense }

func gflops(flops float64, d time.Duration, iters int) float64 {
	return flops * float64(iters) / d.Seconds() / 1e9
}

// BenchmarkConv2dForwardBackward times one Forward+Backward of Conv2d.
func BenchmarkConv2dForwardBackward(b *testing.B) {
	for _, s := range convBenchShapes {
		b.Run(s.name, func(b *testing.B) {
			c, d := newBenchConv(b, s)
			convStep(b, c, d)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				convStep(b, c, d)
			}
			b.ReportMetric(gflops(s.flops(), b.Elapsed(), b.N), "GFLOP/s")
		})
	}
}

// BenchmarkSgemmGonum times the same three GEMMs with gonum's blas32.Gemm on
// pre-unfolded operands (no im2col): the reference the convolution is held to.
func BenchmarkSgemmGonum(b *testing.B) {
	for _, s := range convBenchShapes {
		b.Run(s.name, func(b *testing.B) {
			o := newSgemmOperands(s)
			o.step(1)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				o.step(s.n)
			}
			b.ReportMetric(gflops(s.flops(), b.Elapsed(), b.N), "GFLOP/s")
		})
	}
}

// BenchmarkConv2dVsSgemm measures both in the same run, interleaved, and
// reports ratio = conv GFLOP/s / gonum SGEMM GFLOP/s (floor 0.5).
func BenchmarkConv2dVsSgemm(b *testing.B) {
	for _, s := range convBenchShapes {
		b.Run(s.name, func(b *testing.B) {
			c, d := newBenchConv(b, s)
			o := newSgemmOperands(s)
			convStep(b, c, d)
			o.step(1)
			var convT, gemmT time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				convStep(b, c, d)
				t1 := time.Now()
				o.step(s.n)
				gemmT += time.Since(t1)
				convT += t1.Sub(t0)
			}
			conv, ref := gflops(s.flops(), convT, b.N), gflops(s.flops(), gemmT, b.N)
			b.ReportMetric(conv, "conv-GFLOP/s")
			b.ReportMetric(ref, "sgemm-GFLOP/s")
			b.ReportMetric(conv/ref, "ratio")
		})
	}
}

// BenchmarkGemmSerial compares, on one goroutine, the packed AVX2+FMA GEMM
// with gonum's serial kernel (the portable path) on a conv tile and a square.
func BenchmarkGemmSerial(b *testing.B) {
	for _, sh := range [][3]int{{32, 192, 288}, {256, 256, 256}} {
		m, n, k := sh[0], sh[1], sh[2]
		for _, portable := range []bool{false, true} {
			name := fmt.Sprintf("%dx%dx%d/portable=%v", m, n, k, portable)
			b.Run(name, func(b *testing.B) {
				rng := testRNG(1)
				a, bb, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
				for i := range a {
					a[i] = rng.Float32()
				}
				for i := range bb {
					bb[i] = rng.Float32()
				}
				s := &gemmScratch{portable: portable}
				gemm(s, false, false, m, n, k, a, k, bb, n, c, n, false)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					gemm(s, false, false, m, n, k, a, k, bb, n, c, n, false)
				}
				b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkConv2dPaths times one Forward+Backward on the assembly kernels
// (AVX2+FMA or NEON) and on the portable Go kernels, batch 1. Under qemu,
// cross/kernel-insns.sh counts the instructions of one step of each (qemu
// cannot time arm64 code).
func BenchmarkConv2dPaths(b *testing.B) {
	for _, s := range []convBenchShape{
		{"3x3_32to32_48x160_b1", 1, 32, 32, 48, 160, 3, 1, 1},
		{"3x3_64to64_48x160_b1", 1, 64, 64, 48, 160, 3, 1, 1},
		{"3x3s2_16to24_96x320_b1", 1, 16, 24, 96, 320, 3, 2, 1},
	} {
		for _, path := range []string{"asm", "portable"} {
			b.Run(s.name+"/"+path, func(b *testing.B) {
				c, d := newBenchConv(b, s)
				c.portable = path == "portable"
				convStep(b, c, d)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					convStep(b, c, d)
				}
				b.ReportMetric(gflops(s.flops(), b.Elapsed(), b.N), "GFLOP/s")
			})
		}
	}
}

// BenchmarkConv2dPasses times the passes of one step separately at the
// harness's shapes (batch 4): the input copy + forward tiles, the output
// gradient copy, the weight gradient and the input gradient. Each reports
// GFLOP/s of its own GEMM (the copies report ns/op only).
func BenchmarkConv2dPasses(b *testing.B) {
	for _, s := range []convBenchShape{
		{"3x3_32to32_48x160_b4", 4, 32, 32, 48, 160, 3, 1, 1},
		{"3x3_64to64_48x160_b4", 4, 64, 64, 48, 160, 3, 1, 1},
	} {
		c, d := newBenchConv(b, s)
		convStep(b, c, d)
		gemmFlops := s.flops() / 3
		passes := []struct {
			name  string
			flops float64
			run   func()
		}{
			{"pack+padInput", 0, func() { c.packForward(); c.runPass(opPadInput) }},
			{"forward", gemmFlops, func() { c.runPass(opForward) }},
			{"padGrad", 0, func() { c.dy = Data(d.dy); c.runPass(opPadGrad) }},
			{"weightGrad", gemmFlops, func() { c.runPass(opWeightGrad) }},
			{"inputGrad", gemmFlops, func() { c.runPass(opInputGrad) }},
		}
		c.dy = Data(d.dy)
		for _, p := range passes {
			b.Run(s.name+"/"+p.name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					p.run()
				}
				if p.flops > 0 {
					b.ReportMetric(gflops(p.flops, b.Elapsed(), b.N), "GFLOP/s")
				}
			})
		}
		c.dy = nil
	}
}
