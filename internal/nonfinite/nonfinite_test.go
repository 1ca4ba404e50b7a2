package nonfinite

import (
	"math"
	"math/rand/v2"
	"testing"
)

// countByCompare is the definition: v-v is 0 for a finite v and
// NaN for NaN and ±Inf.
func countByCompare(xs []float32) int {
	n := 0
	for _, v := range xs {
		if v-v != 0 {
			n++
		}
	}
	return n
}

// The word-wise count equals the definition on every class of float32
// (zeros, subnormals, the largest finite values, ±Inf, quiet and
// signalling NaNs with any payload and sign), alone, in runs that fill
// both halves of many words at once (the per-half counters must not
// carry into each other), at every length mod 8 and offset.
func TestCount(t *testing.T) {
	special := []float32{0, float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
		math.MaxFloat32, -math.MaxFloat32, 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.Float32frombits(0x7f800001), math.Float32frombits(0xffffffff), math.Float32frombits(0x7fc00000),
		math.Float32frombits(0x7f7fffff), math.Float32frombits(0x00800000)}
	rng := rand.New(rand.NewPCG(3, 4))
	cases := []struct {
		name string
		xs   []float32
	}{
		{"empty", nil},
		{"one NaN", []float32{float32(math.NaN())}},
		{"specials", special},
		{"all Inf, 1001 values", fill(1001, func(int) float32 { return float32(math.Inf(1)) })},
		{"all NaN, 4096 values", fill(4096, func(int) float32 { return float32(math.NaN()) })},
		{"random bits", fill(10007, func(int) float32 { return math.Float32frombits(rng.Uint32()) })},
		{"mostly finite", fill(614400, func(i int) float32 {
			if i%997 == 0 {
				return special[8+i%8]
			}
			return float32(i) * 1e-3
		})},
	}
	for _, c := range cases {
		for off := 0; off < min(3, len(c.xs)+1); off++ {
			for cut := 0; cut < min(9, len(c.xs)-off+1); cut++ {
				xs := c.xs[off : len(c.xs)-cut]
				want := countByCompare(xs)
				if got := Count(xs); got != want {
					t.Fatalf("Count %s [%d:len-%d]: %d non-finite, want %d", c.name, off, cut, got, want)
				}
				if got := countWords(xs); got != want {
					t.Fatalf("countWords %s [%d:len-%d]: %d non-finite, want %d", c.name, off, cut, got, want)
				}
			}
		}
	}
	if got := Count(cases[4].xs); got != 4096 {
		t.Fatalf("all NaN: %d, want 4096", got)
	}
}

func fill(n int, f func(int) float32) []float32 {
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = f(i)
	}
	return xs
}

// BenchmarkCount scans the outputs the runtime reads of one frame of the
// reference models (depth, scale and epistemic at 192x640: 368,640
// values): Count (AVX2 where the CPU has it), the word-wise loop, and a
// compare per value.
//
//	go test ./internal/nonfinite -run '^$' -bench Count
func BenchmarkCount(b *testing.B) {
	xs := fill(3*192*640, func(i int) float32 { return float32(i%5000) * 1e-2 })
	for _, c := range []struct {
		name string
		f    func([]float32) int
	}{{"count", Count}, {"words", countWords}, {"compare", countByCompare}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(4 * len(xs)))
			for b.Loop() {
				if c.f(xs) != 0 {
					b.Fatal("non-finite")
				}
			}
		})
	}
}
