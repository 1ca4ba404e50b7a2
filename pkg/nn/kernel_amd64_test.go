package nn

import (
	"math"
	"testing"
)

// TestWideTileKernelIsIdentical checks that the AVX-512 tile kernel (two
// panels per call) gives bit-identical results to two AVX2 calls, on the
// kernel and through a convolution's forward and backward passes.
func TestWideTileKernelIsIdentical(t *testing.T) {
	if !cpuHasWide() {
		t.Skip("no AVX-512 on this CPU: the wide kernel does not run")
	}
	rng := testRNG(9)
	buf := make([]float32, 6000)
	for i := range buf {
		buf[i] = rng.Float32()*2 - 1
	}
	for _, k := range []int{1, 2, 7, 300} {
		a := buf[:4*k]
		offs := make([]int, k)
		for l := range offs {
			offs[l] = rng.IntN(len(buf) - 2*tileCols)
		}
		var ro rowOffsets
		ro.set(offs)
		for _, acc := range []bool{false, true} {
			const ldc = 53
			c0 := make([]float32, 3*ldc+2*tileCols)
			for i := range c0 {
				c0[i] = rng.Float32()
			}
			wide, two := append([]float32(nil), c0...), append([]float32(nil), c0...)
			tile2(false, k, a, buf, &ro, wide, ldc, acc)
			tile(false, k, a, buf, &ro, two, ldc, acc)
			tile(false, k, a, buf[tileCols:], &ro, two[tileCols:], ldc, acc)
			for i := range wide {
				if math.Float32bits(wide[i]) != math.Float32bits(two[i]) {
					t.Fatalf("k=%d acc=%v C[%d]: wide %v, two AVX2 calls %v", k, acc, i, wide[i], two[i])
				}
			}
		}
	}
	run := func() (y, dx, dw []float32) {
		c := mustConv(Conv2dConfig{In: 13, Out: 10, Kernel: 3, Stride: 2, Padding: 1, Bias: true})
		x := randDense(testRNG(4), -1, 1, 2, 13, 37, 101)
		out, err := c.Forward(x, Train)
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.Backward(randDense(testRNG(5), -1, 1, out.Shape()...))
		if err != nil {
			t.Fatal(err)
		}
		return append([]float32(nil), Data(out)...), append([]float32(nil), Data(d)...), append([]float32(nil), Data(c.Weight.Grad)...)
	}
	y1, dx1, dw1 := run()
	haveWide = false
	y2, dx2, dw2 := run()
	haveWide = true
	for _, p := range [][2][]float32{{y1, y2}, {dx1, dx2}, {dw1, dw2}} {
		for i := range p[0] {
			if math.Float32bits(p[0][i]) != math.Float32bits(p[1][i]) {
				t.Fatalf("conv with and without the wide kernel differ at %d: %v vs %v", i, p[0][i], p[1][i])
			}
		}
	}
}

func cpuHasWide() bool { return haveWide }

// TestDot6RunsIsIdentical checks that the AVX-512VL kernelDot6Runs adds each
// run's sums to out exactly as two AVX2 dot-kernel calls per run and float32
// additions do (odd lengths, unaligned rows, runs that divide the length and
// runs that leave a short last one).
func TestDot6RunsIsIdentical(t *testing.T) {
	if !cpuHasWide() {
		t.Skip("no AVX-512 on this CPU: the wide kernel does not run")
	}
	rng := testRNG(12)
	buf := make([]float32, 30000)
	for i := range buf {
		buf[i] = rng.Float32()*2 - 1
	}
	for _, c := range []struct{ n8, run8 int }{{1, 1}, {5, 2}, {128, 128}, {300, 128}, {1000, 7}} {
		n := c.n8 * dotStep
		var a [dotRows][]float32
		var b [2 * dotCols][]float32
		for i := range a {
			s := rng.IntN(len(buf) - n)
			a[i] = buf[s : s+n]
		}
		for j := range b {
			s := rng.IntN(len(buf) - n)
			b[j] = buf[s : s+n]
		}
		var got, want [2 * dotRows * dotCols]float32
		for k := range got {
			got[k] = rng.Float32()
			want[k] = got[k]
		}
		dot6Runs(c.n8, c.run8, &a, &b, &got)
		for r0 := 0; r0 < c.n8; r0 += c.run8 {
			r1 := min(r0+c.run8, c.n8)
			var ra [dotRows][]float32
			for i := range a {
				ra[i] = a[i][r0*dotStep : r1*dotStep]
			}
			for half := 0; half < 2; half++ {
				var rb [dotCols][]float32
				for j := range rb {
					rb[j] = b[half*dotCols+j][r0*dotStep : r1*dotStep]
				}
				var sums [dotRows * dotCols]float32
				dot(false, r1-r0, &ra, &rb, &sums)
				for k, v := range sums {
					want[half*dotRows*dotCols+k] += v
				}
			}
		}
		for k := range got {
			if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
				t.Fatalf("n8=%d run8=%d out[%d]: runs kernel %v, AVX2 dot per run %v", c.n8, c.run8, k, got[k], want[k])
			}
		}
	}
}
