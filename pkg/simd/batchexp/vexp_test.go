package batchexp

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// want is the definition, value by value: the Go expression AddExpPlusOne
// promises to reproduce bit for bit.
func want(s []float64, z []float32, maxz float64) []float64 {
	out := append([]float64(nil), s...)
	for i, v := range z {
		out[i] += math.Exp(min(float64(v), maxz)) + 1
	}
	return out
}

// check runs AddExpPlusOne on copies of s and z at offsets 0..3 (the
// kernel reads unaligned) and compares every result's bits with want's.
func check(t *testing.T, name string, s []float64, z []float32, maxz float64) {
	t.Helper()
	w := want(s, z, maxz)
	for off := 0; off < 4; off++ {
		sb := make([]float64, off+len(s))
		zb := make([]float32, off+len(z))
		copy(sb[off:], s)
		copy(zb[off:], z)
		got := sb[off:]
		AddExpPlusOne(got, zb[off:], maxz)
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(w[i]) && !(math.IsNaN(got[i]) && math.IsNaN(w[i])) {
				t.Fatalf("%s, offset %d: s[%d] = %v (%#x) for z = %v (%#x), s0 = %v, maxz = %v; math.Exp gives %v (%#x)",
					name, off, i, got[i], math.Float64bits(got[i]), z[i], math.Float32bits(z[i]), s[i], maxz, w[i], math.Float64bits(w[i]))
			}
		}
	}
}

// randomS gives starting sums like the read-out's: 0, then K-ish sums of
// exp+1 (so that the final add rounds too).
func randomS(rng *rand.Rand, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		if rng.IntN(4) > 0 {
			s[i] = rng.ExpFloat64() * math.Pow(10, float64(rng.IntN(12)-2))
		}
	}
	return s
}

func fillZ(n int, f func(i int) float32) []float32 {
	z := make([]float32, n)
	for i := range z {
		z[i] = f(i)
	}
	return z
}

// TestAddExpPlusOneBitIdentical compares with math.Exp bit for bit on
// about 14 million values: random arguments where exp is normal, and
// every range where math.Exp leaves its main path (results that are
// subnormal or 0, arguments at and above the overflow bound 709.78,
// ±Inf, NaN, ±0, huge values, exact integers), each alone in an
// otherwise ordinary block and in blocks full of them, at every length
// 0..37, with maxz below, inside and above the range.
func TestAddExpPlusOneBitIdentical(t *testing.T) {
	if !haveExpKernel {
		t.Log("no AVX2+FMA here: AddExpPlusOne is math.Exp itself; checking the definition only")
	}
	rng := rand.New(rand.NewPCG(21, 1))
	uniform := func(lo, hi float64) func(int) float32 {
		return func(int) float32 { return float32(lo + (hi-lo)*rng.Float64()) }
	}
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	special := []float32{0, float32(math.Copysign(0, -1)), inf, -inf, nan, math.MaxFloat32, -math.MaxFloat32,
		math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 709.78, 709.79, 710, -708.39, -708.4, -709,
		-744.4, -745.13, -745.2, -746, -1e10, 1e10, 88.7, -87.3, 1, -1, 20, -20}
	const big = 1 << 20
	cases := []struct {
		name string
		z    []float32
	}{
		{"uniform [-20, 20]", fillZ(4*big, uniform(-20, 20))},
		{"uniform [-800, 800]", fillZ(2*big, uniform(-800, 800))},
		{"around the overflow bound 709.78", fillZ(big, uniform(705, 712))},
		{"around -708 (subnormal results)", fillZ(big, uniform(-712, -704))},
		{"around -745 (results 0 and the smallest subnormal)", fillZ(big, uniform(-750, -740))},
		{"exact integers -800..800", fillZ(1601, func(i int) float32 { return float32(i - 800) })},
		{"every float32 bit pattern, strided", fillZ(big, func(i int) float32 { return math.Float32frombits(uint32(i) * 4093) })},
		{"random bits", fillZ(big, func(int) float32 { return math.Float32frombits(rng.Uint32()) })},
		{"specials", special},
		{"special in every 7th lane", fillZ(big/4, func(i int) float32 {
			if i%7 == 3 {
				return special[rng.IntN(len(special))]
			}
			return uniform(-10, 10)(i)
		})},
	}
	for _, c := range cases {
		for _, maxz := range []float64{20, 0, 88, 1000, math.Inf(1)} {
			if c.name[0] == 'u' && c.name != "uniform [-20, 20]" && maxz != 1000 {
				continue // the wide ranges once, unclamped
			}
			check(t, fmt.Sprintf("%s, maxz %v", c.name, maxz), randomS(rng, len(c.z)), c.z, maxz)
		}
	}
	// Every length 0..37, every value of one block special or not.
	for n := 0; n <= 37; n++ {
		for trial := 0; trial < 200; trial++ {
			z := fillZ(n, func(int) float32 {
				if rng.IntN(6) == 0 {
					return special[rng.IntN(len(special))]
				}
				return uniform(-30, 30)(0)
			})
			check(t, fmt.Sprintf("length %d", n), randomS(rng, n), z, 20)
		}
	}
	// Arguments equal to maxz (and ±0 against a zero maxz) take the clamp.
	for _, maxz := range []float64{20, 0, math.Copysign(0, -1), -3.5} {
		z := fillZ(64, func(i int) float32 {
			switch i % 3 {
			case 0:
				return float32(maxz)
			case 1:
				return float32(math.Copysign(0, float64(i%2*2-1)))
			}
			return float32(maxz) + float32(i)
		})
		check(t, fmt.Sprintf("at maxz %v", maxz), randomS(rng, len(z)), z, maxz)
	}
	// A NaN maxz: min gives NaN for every value.
	check(t, "NaN maxz", randomS(rng, 23), fillZ(23, uniform(-5, 5)), math.NaN())
}

// TestAddExpPlusOneLengths: only min(len(s), len(z)) values change.
func TestAddExpPlusOneLengths(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9}
	AddExpPlusOne(s, []float32{0, 0, 0, 0, 0}, 20)
	for i, w := range []float64{3, 4, 5, 6, 7, 6, 7, 8, 9} {
		if s[i] != w {
			t.Fatalf("s = %v, want s[%d] = %v", s, i, w)
		}
	}
	s = []float64{1, 2}
	AddExpPlusOne(s, []float32{0, 0, 0, 0, 0, 0, 0, 0, 0}, 20)
	if s[0] != 3 || s[1] != 4 {
		t.Fatalf("s = %v, want [3 4]", s)
	}
}

// FuzzAddExpPlusOne: any float32 bits (NaN included), any start sum and
// maxz, at every position of a 13-value run (a block of eight, of four,
// and the scalar tail).
func FuzzAddExpPlusOne(f *testing.F) {
	f.Add(uint32(0), 0.0, 20.0)
	f.Add(math.Float32bits(-745.1), 1.5, 20.0)
	f.Add(math.Float32bits(709.8), 0.0, 1000.0)
	f.Add(math.Float32bits(float32(math.Inf(-1))), 3.0, 20.0)
	f.Fuzz(func(t *testing.T, bits uint32, s0, maxz float64) {
		v := math.Float32frombits(bits)
		for at := 0; at < 13; at++ {
			z := fillZ(13, func(i int) float32 { return float32(i)*0.37 - 2 })
			z[at] = v
			s := make([]float64, 13)
			for i := range s {
				s[i] = s0
			}
			check(t, fmt.Sprintf("value at %d", at), s, z, maxz)
		}
	})
}

// BenchmarkAddExpPlusOne: one class of the protocol's read-out (48x160
// pixels, logits ~ N(0, 3)), AddExpPlusOne against the scalar loop.
//
//	go test ./pkg/simd/batchexp -run '^$' -bench AddExpPlusOne -benchmem
func BenchmarkAddExpPlusOne(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	z := fillZ(48*160, func(int) float32 { return float32(3 * rng.NormFloat64()) })
	s := make([]float64, len(z))
	for _, c := range []struct {
		name string
		f    func([]float64, []float32, float64)
	}{{"vector", AddExpPlusOne}, {"scalar", addExpPlusOneScalar}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(4 * len(z)))
			for b.Loop() {
				clear(s)
				c.f(s, z, 20)
			}
		})
	}
}
