package auxue

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func binCounts(bins []int32, k int) []int {
	c := make([]int, k)
	for _, b := range bins {
		if b >= 0 {
			c[b]++
		}
	}
	return c
}

// checkMonotone verifies that a larger error never gets a lower bin and that
// equal errors share a bin.
func checkMonotone(t *testing.T, vals []float32, bins []int32) {
	t.Helper()
	type vb struct {
		v float32
		b int32
	}
	var s []vb
	for i, v := range vals {
		if bins[i] >= 0 {
			s = append(s, vb{v, bins[i]})
		}
	}
	for i := range s {
		for j := range s {
			if s[i].v < s[j].v && s[i].b > s[j].b {
				t.Fatalf("error %v in bin %d but larger error %v in bin %d", s[i].v, s[i].b, s[j].v, s[j].b)
			}
			if s[i].v == s[j].v && s[i].b != s[j].b {
				t.Fatalf("equal errors %v in bins %d and %d", s[i].v, s[i].b, s[j].b)
			}
		}
	}
}

func onesAt(k int, at ...int) []int {
	c := make([]int, k)
	for _, i := range at {
		c[i] = 1
	}
	return c
}

func TestDiscretizeBalanced(t *testing.T) {
	tests := []struct {
		name   string
		vals   func(rng *rand.Rand) []float32
		k      int
		counts []int // exact expected bin sizes
	}{
		{"10 distinct into 4", func(*rand.Rand) []float32 { return []float32{9, 1, 8, 2, 7, 3, 6, 4, 5, 0} }, 4, []int{2, 3, 2, 3}},
		{"12 distinct into 3", func(rng *rand.Rand) []float32 {
			v := make([]float32, 12)
			for i, p := range rng.Perm(12) {
				v[i] = float32(p) * 0.5
			}
			return v
		}, 3, []int{4, 4, 4}},
		// 6 of 10 errors are zero: they share bin 0, the other 4 spread over bins 1..4.
		{"60% zeros", func(*rand.Rand) []float32 { return []float32{0, 3, 0, 0, 1, 0, 4, 0, 2, 0} }, 5, []int{6, 1, 1, 1, 1}},
		// 60% zeros, 40 distinct values into 5 bins: 60 | 10 10 10 10.
		{"60% zeros with K-1 groups to fill", func(*rand.Rand) []float32 {
			v := make([]float32, 100)
			for i := 60; i < 100; i++ {
				v[i] = float32(i)
			}
			return v
		}, 5, []int{60, 10, 10, 10, 10}},
		// A tie group in the middle fills one bin alone; both sides stay balanced.
		{"tie group in the middle", func(*rand.Rand) []float32 {
			v := make([]float32, 0, 40)
			for i := 0; i < 10; i++ {
				v = append(v, float32(i))
			}
			for i := 0; i < 20; i++ {
				v = append(v, 50)
			}
			for i := 0; i < 10; i++ {
				v = append(v, float32(100+i))
			}
			return v
		}, 4, []int{10, 20, 5, 5}},
		// All equal: one group, bin 0.
		{"all equal", func(*rand.Rand) []float32 { return []float32{2, 2, 2, 2, 2} }, 3, []int{5, 0, 0}},
		// K larger than the number of values: spread from bin 0 to bin K-1.
		{"3 values, K=32", func(*rand.Rand) []float32 { return []float32{0.3, 0.1, 0.2} }, 32, onesAt(32, 0, 16, 31)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals := tt.vals(rand.New(rand.NewPCG(5, 6)))
			d, err := NewDiscretizer(tt.k)
			if err != nil {
				t.Fatal(err)
			}
			bins := make([]int32, len(vals))
			if n, err := d.Dataset(vals, nil, bins); err != nil || n != len(vals) {
				t.Fatalf("n=%d err=%v", n, err)
			}
			got := binCounts(bins, tt.k)
			if len(tt.counts) != tt.k {
				t.Fatalf("bad test: %d counts for K=%d", len(tt.counts), tt.k)
			}
			for i := range got {
				if got[i] != tt.counts[i] {
					t.Fatalf("bin sizes %v, want %v", got, tt.counts)
				}
			}
			checkMonotone(t, vals, bins)
		})
	}
}

// Random data with and without heavy ties: sizes within one of J/K when all
// values differ; monotone with shared bins for ties always.
func TestDiscretizeProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	d, _ := NewDiscretizer(7)
	for trial := 0; trial < 20; trial++ {
		n := 50 + rng.IntN(500)
		vals := make([]float32, n)
		quant := trial%2 == 1 // quantized values: many ties
		for i := range vals {
			v := math.Abs(rng.NormFloat64())
			if quant {
				v = math.Round(v * 4)
			}
			vals[i] = float32(v)
		}
		bins := make([]int32, n)
		if _, err := d.Dataset(vals, nil, bins); err != nil {
			t.Fatal(err)
		}
		checkMonotone(t, vals, bins)
		if !quant {
			for k, c := range binCounts(bins, 7) {
				if c != n/7 && c != (n+6)/7 {
					t.Fatalf("J=%d bin %d has %d values, want %d or %d", n, k, c, n/7, (n+6)/7)
				}
			}
		}
	}
}

func TestDiscretizePerImageMask(t *testing.T) {
	d, _ := NewDiscretizer(2)
	vals := []float32{4, 3, 2, 1, 9, 9, 9, 9}
	valid := []bool{true, true, false, true, false, false, false, false} // image 1 has no valid pixel
	bins := make([]int32, 8)
	if err := d.PerImage(vals, valid, 2, 4, bins); err != nil {
		t.Fatal(err)
	}
	// Image 0 valid values {4, 3, 1}: target 1.5 -> {1} | {3, 4}.
	want := []int32{1, 1, -1, 0, -1, -1, -1, -1}
	for i := range want {
		if bins[i] != want[i] {
			t.Fatalf("bins %v, want %v", bins, want)
		}
	}
	// Assign with edges fitted elsewhere: between bins goes up, beyond goes to the ends.
	if _, err := d.Fit([]float32{1, 2, 10, 11}, nil); err != nil {
		t.Fatal(err)
	}
	out := make([]int32, 4)
	if err := d.Assign([]float32{-5, 5, 100, 2}, nil, out); err != nil {
		t.Fatal(err)
	}
	if out[0] != 0 || out[1] != 1 || out[2] != 1 || out[3] != 0 {
		t.Errorf("assign %v", out)
	}
}

func TestDiscretizeBadInput(t *testing.T) {
	nan := float32(math.NaN())
	if _, err := NewDiscretizer(1); err == nil || !strings.Contains(err.Error(), "at least 2") {
		t.Errorf("K=1: %v", err)
	}
	d, _ := NewDiscretizer(4)
	tests := []struct {
		name    string
		vals    []float32
		valid   []bool
		n, hw   int
		bins    int
		wantErr string
	}{
		{"NaN error", []float32{1, nan, 2, 3}, nil, 1, 4, 4, "index 1 is NaN"},
		{"Inf error", []float32{1, 2, float32(math.Inf(-1)), 3}, nil, 2, 2, 4, "image 1: discretize: error value at index 0 is -Inf"},
		{"NaN masked out", []float32{1, nan, 2, 3}, []bool{true, false, true, true}, 1, 4, 4, ""},
		{"mask length", []float32{1, 2}, []bool{true}, 1, 2, 2, "need 2"},
		{"bins length", []float32{1, 2}, nil, 1, 2, 3, "need 2"},
		{"shape", []float32{1, 2, 3}, nil, 2, 2, 3, "need 4"},
		{"empty", nil, nil, 0, 1, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := d.PerImage(tt.vals, tt.valid, tt.n, tt.hw, make([]int32, tt.bins))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func depthErrorMap(fracValid float64) ([]float32, []bool) {
	const h, w = 192, 640
	rng := rand.New(rand.NewPCG(11, 12))
	vals := make([]float32, h*w)
	valid := make([]bool, h*w)
	for i := range vals {
		vals[i] = float32(rng.ExpFloat64() * 0.5) // long-tailed errors
		valid[i] = rng.Float64() < fracValid
	}
	return vals, valid
}

func TestDiscretizeNoAllocs(t *testing.T) {
	vals, valid := depthErrorMap(0.05)
	d, _ := NewDiscretizer(32)
	bins := make([]int32, len(vals))
	_ = d.PerImage(vals, valid, 1, len(vals), bins) // warm the buffers
	if a := testing.AllocsPerRun(3, func() { _ = d.PerImage(vals, valid, 1, len(vals), bins) }); a != 0 {
		t.Errorf("PerImage allocates %v times per call in steady state", a)
	}
}

func BenchmarkDiscretize192x640(b *testing.B) {
	for _, frac := range []float64{0.05, 1} {
		name := "valid5pct"
		if frac == 1 {
			name = "valid100pct"
		}
		b.Run(name, func(b *testing.B) {
			vals, valid := depthErrorMap(frac)
			if frac == 1 {
				valid = nil
			}
			d, _ := NewDiscretizer(32)
			bins := make([]int32, len(vals))
			b.ReportAllocs()
			for b.Loop() {
				if err := d.PerImage(vals, valid, 1, len(vals), bins); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzDiscretize feeds arbitrary float32 maps (NaN, Inf, -0, ties) and K:
// never a panic; either a clear error for non-finite values or bins that are
// monotone in the error, shared by equal errors and within [0, K).
func FuzzDiscretize(f *testing.F) {
	f.Add(uint8(4), []byte{0, 0, 0, 0, 0, 0, 128, 63, 0, 0, 0, 64})
	f.Add(uint8(32), []byte{0, 0, 192, 127, 0, 0, 128, 63}) // NaN
	f.Add(uint8(2), []byte{0, 0, 0, 128, 0, 0, 0, 0})       // -0 and +0
	f.Add(uint8(1), []byte{1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, k uint8, raw []byte) {
		vals := make([]float32, len(raw)/4)
		finite := true
		for i := range vals {
			vals[i] = math.Float32frombits(uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24)
			if math.IsNaN(float64(vals[i])) || math.IsInf(float64(vals[i]), 0) {
				finite = false
			}
		}
		d, err := NewDiscretizer(int(k))
		if k < 2 {
			if err == nil {
				t.Fatal("K < 2 accepted")
			}
			return
		}
		bins := make([]int32, len(vals))
		_, err = d.Dataset(vals, nil, bins)
		if !finite {
			if err == nil {
				t.Fatal("non-finite error accepted")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range bins {
			if b < 0 || int(b) >= int(k) {
				t.Fatalf("bin %d at %d outside [0,%d)", b, i, k)
			}
		}
		checkMonotone(t, vals, bins)
	})
}
