package nn

import (
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"gorgonia.org/tensor"
)

// naiveConv is the textbook seven-loop convolution with its gradients, the
// independent reference for the im2col path.
func naiveConv(c *Conv2d, x, dy []float32, n, h, w int) (y, dx, dw, db []float32) {
	g := c.Config
	ho, wo := g.OutputSize(h, w)
	k := g.Kernel
	wt := Data(c.Weight.Value)
	y = make([]float32, n*g.Out*ho*wo)
	dx = make([]float32, len(x))
	dw = make([]float32, len(wt))
	db = make([]float32, g.Out)
	for b := 0; b < n; b++ {
		for o := 0; o < g.Out; o++ {
			for i := 0; i < ho; i++ {
				for j := 0; j < wo; j++ {
					yi := ((b*g.Out+o)*ho+i)*wo + j
					var s float64
					if c.Bias != nil {
						s = float64(Data(c.Bias.Value)[o])
					}
					var gy float32
					if dy != nil {
						gy = dy[yi]
						db[o] += gy
					}
					for ch := 0; ch < g.In; ch++ {
						for kh := 0; kh < k; kh++ {
							for kw := 0; kw < k; kw++ {
								ih, iw := i*g.Stride-g.Padding+kh*g.Dilation, j*g.Stride-g.Padding+kw*g.Dilation
								if ih < 0 || ih >= h || iw < 0 || iw >= w {
									continue
								}
								xi := ((b*g.In+ch)*h+ih)*w + iw
								wi := ((o*g.In+ch)*k+kh)*k + kw
								s += float64(x[xi]) * float64(wt[wi])
								dx[xi] += gy * wt[wi]
								dw[wi] += gy * x[xi]
							}
						}
					}
					y[yi] = float32(s)
				}
			}
		}
	}
	return y, dx, dw, db
}

var convCases = []struct {
	name string
	cfg  Conv2dConfig
	n    int
	h, w int
}{
	{"3x3 s1 p1", Conv2dConfig{In: 3, Out: 4, Kernel: 3, Stride: 1, Padding: 1, Bias: true}, 2, 5, 6},
	{"1x1", Conv2dConfig{In: 4, Out: 2, Kernel: 1, Bias: true}, 1, 3, 3},
	{"3x3 s2 p1 odd", Conv2dConfig{In: 2, Out: 3, Kernel: 3, Stride: 2, Padding: 1, Bias: true}, 2, 7, 5},
	{"5x5 s1 p2", Conv2dConfig{In: 2, Out: 2, Kernel: 5, Stride: 1, Padding: 2}, 1, 6, 7},
	{"3x3 dilation 2 p2", Conv2dConfig{In: 2, Out: 3, Kernel: 3, Stride: 1, Padding: 2, Dilation: 2, Bias: true}, 1, 7, 6},
	{"2x2 s2 p0 even", Conv2dConfig{In: 3, Out: 2, Kernel: 2, Stride: 2}, 2, 6, 4},
	{"3x3 s3 d2 p1", Conv2dConfig{In: 2, Out: 2, Kernel: 3, Stride: 3, Padding: 1, Dilation: 2, Bias: true}, 1, 9, 8},
	{"4x4 s1 p0 valid", Conv2dConfig{In: 1, Out: 2, Kernel: 4, Stride: 1}, 3, 5, 4},
}

func TestConv2dGradients(t *testing.T) {
	for i, tc := range convCases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewConv2d(tc.cfg, testRNG(uint64(i)))
			if err != nil {
				t.Fatal(err)
			}
			if c.Bias != nil {
				for j := range Data(c.Bias.Value) {
					Data(c.Bias.Value)[j] = 0.1 * float32(j+1)
				}
			}
			x := randDense(testRNG(uint64(100+i)), -1, 1, tc.n, tc.cfg.In, tc.h, tc.w)
			checkLayerGrads(t, c, x, 1e-2, defaultTol, nil)
		})
	}
}

// TestConv2dMatchesNaive compares Forward and Backward with the direct loops
// on odd shapes: 1x1, even kernels, stride 2 and 3, dilation 2, padding 0 and
// the largest allowed padding, channel counts that are not multiples of the
// kernels' 4-row and 3-column blocks, images narrower than one 24-wide
// panel, several tiles per image and batches larger than the worker count;
// each with the assembly kernels (where the CPU has them) and the Go ones.
func TestConv2dMatchesNaive(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Conv2dConfig
		n, h, w int
	}{
		{"3x3 p1 5->7 multi-tile", Conv2dConfig{In: 5, Out: 7, Kernel: 3, Stride: 1, Padding: 1, Bias: true}, 3, 19, 23},
		{"3x3 s2 3->70", Conv2dConfig{In: 3, Out: 70, Kernel: 3, Stride: 2, Padding: 1, Bias: true}, 1, 33, 41},
		{"5x5 d2 p4 1->2", Conv2dConfig{In: 1, Out: 2, Kernel: 5, Stride: 1, Padding: 4, Dilation: 2}, 5, 17, 30},
		{"1x1 9->13", Conv2dConfig{In: 9, Out: 13, Kernel: 1, Bias: true}, 2, 7, 11},
		{"1x1 s2 6->5", Conv2dConfig{In: 6, Out: 5, Kernel: 1, Stride: 2}, 2, 9, 10},
		{"3x3 d2 p2 11->17", Conv2dConfig{In: 11, Out: 17, Kernel: 3, Padding: 2, Dilation: 2, Bias: true}, 2, 12, 29},
		{"3x3 d2 p0 valid", Conv2dConfig{In: 3, Out: 6, Kernel: 3, Dilation: 2, Bias: true}, 1, 9, 13},
		{"3x3 d2 p4 max pad", Conv2dConfig{In: 2, Out: 3, Kernel: 3, Padding: 4, Dilation: 2, Bias: true}, 1, 5, 6},
		{"3x3 p2 max pad", Conv2dConfig{In: 4, Out: 4, Kernel: 3, Padding: 2}, 3, 4, 5},
		{"2x2 p1 even", Conv2dConfig{In: 7, Out: 9, Kernel: 2, Padding: 1, Bias: true}, 1, 6, 8},
		{"4x4 s1 p0 narrow", Conv2dConfig{In: 3, Out: 1, Kernel: 4, Bias: true}, 2, 6, 5},
		{"3x3 s2 d2 p2 13->11", Conv2dConfig{In: 13, Out: 11, Kernel: 3, Stride: 2, Padding: 2, Dilation: 2, Bias: true}, 3, 21, 37},
		{"3x3 s3 p1 odd", Conv2dConfig{In: 5, Out: 3, Kernel: 3, Stride: 3, Padding: 1}, 1, 17, 16},
		{"3x3 p1 33->31 batch 1", Conv2dConfig{In: 33, Out: 31, Kernel: 3, Padding: 1, Bias: true}, 1, 13, 50},
		{"3x3 p1 1x1 image", Conv2dConfig{In: 2, Out: 5, Kernel: 3, Padding: 1, Bias: true}, 2, 1, 1},
		// More positions per image (70 rows of pitch 132) than several runs
		// of the weight-gradient dot kernel (convQBlock), the last one short.
		{"3x3 p1 3->5 two weight-gradient runs", Conv2dConfig{In: 3, Out: 5, Kernel: 3, Padding: 1, Bias: true}, 2, 70, 130},
	}
	for i, tc := range tests {
		for _, portable := range []bool{false, true} {
			name := fmt.Sprintf("%s/portable=%v", tc.name, portable)
			t.Run(name, func(t *testing.T) {
				c, err := NewConv2d(tc.cfg, testRNG(uint64(i)))
				if err != nil {
					t.Fatal(err)
				}
				c.portable = portable
				if c.Bias != nil {
					for j := range Data(c.Bias.Value) {
						Data(c.Bias.Value)[j] = float32(j) / 10
					}
				}
				x := randDense(testRNG(uint64(10+i)), -1, 1, tc.n, tc.cfg.In, tc.h, tc.w)
				// Two steps: the second reuses every buffer of the first.
				for step := 0; step < 2; step++ {
					y, err := c.Forward(x, Train)
					if err != nil {
						t.Fatal(err)
					}
					dy := randDense(testRNG(uint64(20+i+step)), -1, 1, y.Shape()...)
					ZeroGrad(c.Params())
					dx, err := c.Backward(dy)
					if err != nil {
						t.Fatal(err)
					}
					wy, wdx, wdw, wdb := naiveConv(c, Data(x), Data(dy), tc.n, tc.h, tc.w)
					compareConv(t, "y", Data(y), wy)
					compareConv(t, "dx", Data(dx), wdx)
					compareConv(t, "dw", Data(c.Weight.Grad), wdw)
					if c.Bias != nil {
						compareConv(t, "db", Data(c.Bias.Grad), wdb)
					}
				}
			})
		}
	}
}

func compareConv(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for j := range got {
		if d := math.Abs(float64(got[j] - want[j])); d > 1e-4*(1+math.Abs(float64(want[j]))) {
			t.Fatalf("%s[%d] = %v, want %v", what, j, got[j], want[j])
		}
	}
}

func TestConv2dConfigErrors(t *testing.T) {
	bad := []Conv2dConfig{
		{In: 0, Out: 1, Kernel: 3},
		{In: 1, Out: 1, Kernel: 0},
		{In: 1, Out: 1, Kernel: 3, Stride: -1},
		{In: 1, Out: 1, Kernel: 3, Padding: -1},
		{In: 1, Out: 1, Kernel: 3, Dilation: -2},
		{In: 1, Out: 1, Kernel: 3, Padding: 3},
	}
	for _, cfg := range bad {
		if _, err := NewConv2d(cfg, nil); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
	c, err := NewConv2d(Conv2dConfig{In: 2, Out: 3, Kernel: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Config.Stride != 1 || c.Config.Dilation != 1 || c.Bias != nil || len(c.Params()) != 1 {
		t.Errorf("defaults: %+v, bias %v", c.Config, c.Bias)
	}
	for _, x := range []*tensor.Dense{NewDense(1, 3, 5, 5), NewDense(2, 5, 5), NewDense(1, 2, 2, 2)} {
		if _, err := c.Forward(x, Train); err == nil {
			t.Errorf("input %v accepted", x.Shape())
		}
	}
}

func TestConv2dSteadyStateAllocs(t *testing.T) {
	c, err := NewConv2d(Conv2dConfig{In: 4, Out: 8, Kernel: 3, Padding: 1, Bias: true}, testRNG(1))
	if err != nil {
		t.Fatal(err)
	}
	x := randDense(testRNG(2), -1, 1, 2, 4, 20, 30)
	dy := NewDense(2, 8, 20, 30)
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := c.Forward(x, Train); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Backward(dy); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("allocs per forward+backward: %v", allocs)
	if allocs > 0 {
		t.Errorf("steady-state forward+backward allocates %v times", allocs)
	}
}

// TestConv2dWorkersReleased checks that the worker goroutines of a dropped
// layer exit once the layer is collected.
func TestConv2dWorkersReleased(t *testing.T) {
	if workers() < 2 {
		t.Skip("single worker: no pool goroutines")
	}
	base := runtime.NumGoroutine()
	func() {
		for i := 0; i < 3; i++ {
			c := mustConv(Conv2dConfig{In: 2, Out: 2, Kernel: 3, Padding: 1})
			if _, err := c.Forward(NewDense(2, 2, 8, 8), Eval); err != nil {
				t.Fatal(err)
			}
		}
	}()
	if runtime.NumGoroutine() <= base {
		t.Fatalf("no worker goroutines started (%d before, %d after)", base, runtime.NumGoroutine())
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		t.Errorf("%d goroutines remain, %d before the layers were created", n, base)
	}
}

// TestConv2dSetWorkers checks that SetWorkers resizes the pool on the next
// pass and that the goroutines of the replaced pool exit at once (the layer
// is still alive, so no cleanup closes them).
func TestConv2dSetWorkers(t *testing.T) {
	c := mustConv(Conv2dConfig{In: 2, Out: 2, Kernel: 3, Padding: 1})
	x := NewDense(2, 2, 8, 8)
	base := runtime.NumGoroutine()
	for _, tc := range []struct{ set, size, extra int }{{4, 4, 3}, {1, 1, 0}, {2, 2, 1}, {0, workers(), workers() - 1}} {
		c.SetWorkers(tc.set)
		if _, err := c.Forward(x, Eval); err != nil {
			t.Fatal(err)
		}
		if c.pool.size != tc.size {
			t.Fatalf("SetWorkers(%d): pool of %d, want %d", tc.set, c.pool.size, tc.size)
		}
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() != base+tc.extra && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n != base+tc.extra {
			t.Errorf("SetWorkers(%d): %d goroutines, want %d (%d before the first pass)", tc.set, n, base+tc.extra, base)
		}
	}
	runtime.KeepAlive(c)
}

// TestConv2dBiasGradientOrder pins the bias gradient's summation order: per
// image, one float32 chain over the plane in element order, then the images
// in order (padGrad interleaves four planes' chains without reordering any).
func TestConv2dBiasGradientOrder(t *testing.T) {
	c := mustConv(Conv2dConfig{In: 3, Out: 7, Kernel: 3, Padding: 1, Bias: true})
	x := randDense(testRNG(1), -1, 1, 3, 3, 11, 13)
	y, err := c.Forward(x, Train)
	if err != nil {
		t.Fatal(err)
	}
	dy := randDense(testRNG(2), -1, 1, y.Shape()...)
	ZeroGrad(c.Params())
	if _, err := c.Backward(dy); err != nil {
		t.Fatal(err)
	}
	P := 11 * 13
	for o := 0; o < 7; o++ {
		var want float32
		for n := 0; n < 3; n++ {
			var s float32
			for _, v := range Data(dy)[(n*7+o)*P : (n*7+o+1)*P] {
				s += v
			}
			want += s
		}
		if got := Data(c.Bias.Grad)[o]; got != want {
			t.Errorf("bias gradient %d = %v, want %v", o, got, want)
		}
	}
}

// TestConv2dWorkerCountIndependent checks that Forward and Backward give the
// same bits on pools of 1, 2, 3 and 5 workers. The pool hands out chunks of
// units to whichever worker is free, so the schedule differs from run to run;
// each unit's sums must not depend on it. Shapes with several tiles per
// image, an odd number of weight-gradient blocks and stride 2 (four phases).
func TestConv2dWorkerCountIndependent(t *testing.T) {
	for _, cfg := range []Conv2dConfig{
		{In: 7, Out: 9, Kernel: 3, Padding: 1, Bias: true},
		{In: 5, Out: 6, Kernel: 3, Stride: 2, Padding: 1, Bias: true},
		{In: 4, Out: 8, Kernel: 3, Padding: 2, Dilation: 2},
	} {
		t.Run(fmt.Sprintf("%d->%d_s%d_d%d", cfg.In, cfg.Out, max(cfg.Stride, 1), max(cfg.Dilation, 1)), func(t *testing.T) {
			x := randDense(testRNG(1), -1, 1, 3, cfg.In, 37, 53)
			var ref [][]float32
			for _, nw := range []int{1, 2, 3, 5} {
				c := mustConv(cfg)
				c.SetWorkers(nw)
				var got [][]float32
				for step := 0; step < 3; step++ { // reused buffers and dynamic chunks
					ZeroGrad(c.Params())
					y, err := c.Forward(x, Train)
					if err != nil {
						t.Fatal(err)
					}
					dy := randDense(testRNG(2), -1, 1, y.Shape()...)
					dx, err := c.Backward(dy)
					if err != nil {
						t.Fatal(err)
					}
					got = [][]float32{Data(y), Data(dx), Data(c.Weight.Grad)}
					if c.Bias != nil {
						got = append(got, Data(c.Bias.Grad))
					}
					if ref == nil {
						for _, v := range got {
							ref = append(ref, append([]float32(nil), v...))
						}
						continue
					}
					for i, v := range got {
						for j := range v {
							if math.Float32bits(v[j]) != math.Float32bits(ref[i][j]) {
								t.Fatalf("%d workers, step %d: result %d differs at %d: %v, 1 worker %v", nw, step, i, j, v[j], ref[i][j])
							}
						}
					}
				}
			}
		})
	}
}
