package nn

import (
	"fmt"
	"math"
	"testing"
)

func TestGemmAgainstNaive(t *testing.T) {
	t.Logf("micro-kernels: %s", KernelName())
	shapes := [][3]int{ // m, n, k
		{1, 1, 1}, {6, 16, 1}, {7, 17, 3}, {5, 15, 300}, {73, 33, 257}, {32, 192, 288},
		{288, 192, 32}, {13, 3100, 5}, {2, 40, 600},
	}
	for _, portable := range []bool{false, true} {
		for _, sh := range shapes {
			for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
				for _, acc := range []bool{false, true} {
					name := fmt.Sprintf("portable=%v/%dx%dx%d/tA=%v,tB=%v/acc=%v", portable, sh[0], sh[1], sh[2], tr[0], tr[1], acc)
					checkGemm(t, name, portable, tr[0], tr[1], sh[0], sh[1], sh[2], acc)
				}
			}
		}
	}
}

func checkGemm(t *testing.T, name string, portable, ta, tb bool, m, n, k int, acc bool) {
	t.Helper()
	rng := testRNG(uint64(m*1000 + n*10 + k))
	lda, ldb, ldc := k+3, n+2, n+5 // padded strides: nothing outside the region may change
	if ta {
		lda = m + 3
	}
	if tb {
		ldb = k + 2
	}
	rowsA, rowsB := m, k
	if ta {
		rowsA = k
	}
	if tb {
		rowsB = n
	}
	a, b, c := make([]float32, rowsA*lda), make([]float32, rowsB*ldb), make([]float32, m*ldc)
	for _, s := range [][]float32{a, b, c} {
		for i := range s {
			s[i] = rng.Float32()*2 - 1
		}
	}
	c0 := append([]float32(nil), c...)
	s := &gemmScratch{portable: portable}
	gemm(s, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, acc)
	for i := 0; i < m; i++ {
		for j := 0; j < ldc; j++ {
			got := c[i*ldc+j]
			if j >= n {
				if got != c0[i*ldc+j] {
					t.Fatalf("%s: C[%d,%d] outside the product was written", name, i, j)
				}
				continue
			}
			var want float64
			if acc {
				want = float64(c0[i*ldc+j])
			}
			for l := 0; l < k; l++ {
				var av, bv float32
				if ta {
					av = a[l*lda+i]
				} else {
					av = a[i*lda+l]
				}
				if tb {
					bv = b[j*ldb+l]
				} else {
					bv = b[l*ldb+j]
				}
				want += float64(av) * float64(bv)
			}
			if math.Abs(float64(got)-want) > 1e-5*float64(k+1) {
				t.Fatalf("%s: C[%d,%d] = %v, want %v", name, i, j, got, want)
			}
		}
	}
}

// TestConv2dPortableKernelAgrees runs the Go-kernel path (the one CPUs
// without AVX2+FMA or NEON use) against the default path on the same
// convolution.
func TestConv2dPortableKernelAgrees(t *testing.T) {
	cfg := Conv2dConfig{In: 5, Out: 9, Kernel: 3, Stride: 1, Padding: 1, Bias: true}
	fast, slow := mustConv(cfg), mustConv(cfg)
	slow.portable = true
	x := randDense(testRNG(1), -1, 1, 2, 5, 17, 21)
	yf, err := fast.Forward(x, Train)
	if err != nil {
		t.Fatal(err)
	}
	ys, err := slow.Forward(x, Train)
	if err != nil {
		t.Fatal(err)
	}
	dy := randDense(testRNG(2), -1, 1, yf.Shape()...)
	dxf, _ := fast.Backward(dy)
	dxs, _ := slow.Backward(dy)
	for _, pair := range [][2][]float32{{Data(yf), Data(ys)}, {Data(dxf), Data(dxs)}, {Data(fast.Weight.Grad), Data(slow.Weight.Grad)}} {
		for i := range pair[0] {
			if d := math.Abs(float64(pair[0][i] - pair[1][i])); d > 1e-4 {
				t.Fatalf("kernels disagree at %d: %v vs %v", i, pair[0][i], pair[1][i])
			}
		}
	}
}

// TestKernelsAgainstGo compares the assembly kernels with the Go ones and
// with float64 sums: the tile kernel on offset tables that are not monotonic
// (the flipped taps of the input gradient), odd and even step counts, both
// accumulate modes and a padded C; the dot kernel on unaligned rows.
func TestKernelsAgainstGo(t *testing.T) {
	if !haveKernel {
		t.Skipf("no assembly kernels on this CPU (%s): the Go kernels are the only path", KernelName())
	}
	rng := testRNG(5)
	buf := make([]float32, 4000)
	for i := range buf {
		buf[i] = rng.Float32()*2 - 1
	}
	for _, k := range []int{1, 2, 3, 16, 37} {
		a := buf[:4*k]
		offs := make([]int, k)
		for l := range offs {
			offs[l] = rng.IntN(len(buf) - tileCols)
		}
		var ro rowOffsets
		ro.set(offs)
		for _, acc := range []bool{false, true} {
			const ldc = 31
			c0 := make([]float32, 3*ldc+tileCols+2)
			for i := range c0 {
				c0[i] = rng.Float32()
			}
			cAsm, cGo := append([]float32(nil), c0...), append([]float32(nil), c0...)
			tile(false, k, a, buf, &ro, cAsm, ldc, acc)
			tile(true, k, a, buf, &ro, cGo, ldc, acc)
			for i := range c0 {
				r, j := i/ldc, i%ldc
				if r >= tileRows || j >= tileCols {
					if cAsm[i] != c0[i] {
						t.Fatalf("k=%d: tile kernel wrote C[%d] outside its block", k, i)
					}
					continue
				}
				var want float64
				if acc {
					want = float64(c0[i])
				}
				for l := 0; l < k; l++ {
					want += float64(a[4*l+r]) * float64(buf[offs[l]+j])
				}
				if math.Abs(float64(cAsm[i])-want) > 1e-5*float64(k+1) || math.Abs(float64(cGo[i])-want) > 1e-5*float64(k+1) {
					t.Fatalf("k=%d acc=%v C[%d,%d]: asm %v, Go %v, want %v", k, acc, r, j, cAsm[i], cGo[i], want)
				}
			}
		}
	}
	for _, n8 := range []int{1, 2, 7, 40} {
		n := n8 * dotStep
		var a [dotRows][]float32
		var b [dotCols][]float32
		for i := range a {
			o := 1 + rng.IntN(len(buf)-n-1) // unaligned
			a[i] = buf[o : o+n]
		}
		for j := range b {
			o := 1 + rng.IntN(len(buf)-n-1)
			b[j] = buf[o : o+n]
		}
		var sAsm, sGo [dotRows * dotCols]float32
		dot(false, n8, &a, &b, &sAsm)
		dot(true, n8, &a, &b, &sGo)
		for i := range a {
			for j := range b {
				var want float64
				for t := 0; t < n; t++ {
					want += float64(a[i][t]) * float64(b[j][t])
				}
				if math.Abs(float64(sAsm[3*i+j])-want) > 1e-5*float64(n) || math.Abs(float64(sGo[3*i+j])-want) > 1e-5*float64(n) {
					t.Fatalf("n=%d (%d,%d): asm %v, Go %v, want %v", n, i, j, sAsm[3*i+j], sGo[3*i+j], want)
				}
			}
		}
	}
}
