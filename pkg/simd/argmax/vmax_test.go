package argmax

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestUpdateArgmax folds rows of random values (with ties, ±0, ±Inf and
// NaN among them) through UpdateArgmax and through the Go loop, at every
// length 0..41 and offset 0..3, and requires the same bits in top and
// the same classes.
func TestUpdateArgmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 4))
	edges := []float32{0, float32(math.Copysign(0, -1)), 1, 1, 2, float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32}
	value := func() float32 {
		if rng.IntN(3) == 0 {
			return edges[rng.IntN(len(edges))]
		}
		return float32(rng.NormFloat64())
	}
	for n := 0; n <= 41; n++ {
		for off := 0; off < 4; off++ {
			for trial := 0; trial < 50; trial++ {
				top, cls := make([]float32, off+n), make([]int32, off+n)
				wantTop, wantCls := make([]float32, n), make([]int32, n)
				for i := range n {
					top[off+i] = value()
					wantTop[i] = top[off+i]
				}
				for c := int32(1); c <= 6; c++ {
					z := make([]float32, off+n)
					for i := range z {
						z[i] = value()
					}
					UpdateArgmax(top[off:], cls[off:], z[off:], c)
					updateArgmaxScalar(wantTop, wantCls, z[off:], c)
				}
				for i := range n {
					if math.Float32bits(top[off+i]) != math.Float32bits(wantTop[i]) || cls[off+i] != wantCls[i] {
						t.Fatalf("length %d, offset %d: element %d: top %v class %d, want %v class %d",
							n, off, i, top[off+i], cls[off+i], wantTop[i], wantCls[i])
					}
				}
			}
		}
	}
}

// TestUpdateArgmaxLengths: only the shortest length's elements change.
func TestUpdateArgmaxLengths(t *testing.T) {
	top := make([]float32, 12)
	cls := make([]int32, 10)
	z := make([]float32, 11)
	for i := range z {
		z[i] = 1
	}
	UpdateArgmax(top, cls, z, 3)
	for i := range top {
		want := float32(0)
		if i < 10 {
			want = 1
			if cls[i] != 3 {
				t.Fatalf("cls = %v, want 3 in the first 10", cls)
			}
		}
		if top[i] != want {
			t.Fatalf("top = %v: want 1 in the first 10, then 0", top)
		}
	}
}

// BenchmarkUpdateArgmax: 32 rows of 256 values (one block of the DIDO
// read-out at K = 32).
//
//	go test ./pkg/simd/argmax -run '^$' -bench UpdateArgmax -benchmem
func BenchmarkUpdateArgmax(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	rows := make([][]float32, 32)
	for c := range rows {
		rows[c] = make([]float32, 256)
		for i := range rows[c] {
			rows[c][i] = float32(3 * rng.NormFloat64())
		}
	}
	top, cls := make([]float32, 256), make([]int32, 256)
	for _, f := range []struct {
		name string
		f    func([]float32, []int32, []float32, int32)
	}{{"vector", UpdateArgmax}, {"scalar", updateArgmaxScalar}} {
		b.Run(f.name, func(b *testing.B) {
			for b.Loop() {
				copy(top, rows[0])
				clear(cls)
				for c := 1; c < len(rows); c++ {
					f.f(top, cls, rows[c], int32(c))
				}
			}
		})
	}
}
