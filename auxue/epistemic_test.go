package auxue

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// epistemicReference is DIDOLoss.Epistemic as it was before the blocked,
// vectorised version (element by element, one math.Exp per logit), kept
// verbatim as the definition the new one must reproduce bit for bit.
func epistemicReference(d DIDOLoss, logits []float32, n, hw int, out []float32, bins []int32) error {
	maxz := d.maxLogit()
	for b := 0; b < n; b++ {
		base := b * d.K * hw
		for j := 0; j < hw; j++ {
			s, best, arg := 0.0, math.Inf(-1), int32(0)
			for c := 0; c < d.K; c++ {
				z := float64(logits[base+c*hw+j])
				if math.IsNaN(z) {
					return fmt.Errorf("DIDO read-out: logit of class %d at element %d is NaN", c, b*hw+j)
				}
				e, _ := evidence(z, maxz)
				s += e + 1
				if z > best {
					best, arg = z, int32(c)
				}
			}
			out[b*hw+j] = float32(float64(d.K) / s)
			if bins != nil {
				bins[b*hw+j] = arg
			}
		}
	}
	return nil
}

// randomLogits draws N(0, sigma) logits with, at rate special, a value
// from the edges: above the clamp, ±Inf, very negative (exp underflows),
// ±0 and small integers (ties for the argmax).
func randomLogits(rng *rand.Rand, size int, sigma, special float64) []float32 {
	edges := []float32{100, 80, 79.9, 1e30, float32(math.Inf(1)), float32(math.Inf(-1)), -800, -745, -1e30,
		0, float32(math.Copysign(0, -1)), 1, 2, 3, -1}
	z := make([]float32, size)
	for i := range z {
		if rng.Float64() < special {
			z[i] = edges[rng.IntN(len(edges))]
			continue
		}
		z[i] = float32(sigma * rng.NormFloat64())
	}
	return z
}

// sameEpistemic runs Epistemic and the reference on the same logits into
// buffers prefilled alike and requires the same error text and the same
// bits in every out and bins value (also those written before an error).
func sameEpistemic(t *testing.T, name string, d DIDOLoss, logits []float32, n, hw int, withBins bool) error {
	t.Helper()
	got, want := make([]float32, n*hw), make([]float32, n*hw)
	for i := range got {
		got[i], want[i] = -7, -7
	}
	var gotBins, wantBins []int32
	if withBins {
		gotBins, wantBins = make([]int32, n*hw), make([]int32, n*hw)
		for i := range gotBins {
			gotBins[i], wantBins[i] = -3, -3
		}
	}
	errGot := d.Epistemic(logits, n, hw, got, gotBins)
	errWant := epistemicReference(d, logits, n, hw, want, wantBins)
	if fmt.Sprint(errGot) != fmt.Sprint(errWant) {
		t.Fatalf("%s: error %v, reference %v", name, errGot, errWant)
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: out[%d] = %v (%#x), reference %v (%#x)", name, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
		if withBins && gotBins[i] != wantBins[i] {
			t.Fatalf("%s: bins[%d] = %d, reference %d", name, i, gotBins[i], wantBins[i])
		}
	}
	return errGot
}

// TestEpistemicMatchesReference: the blocked read-out equals the element
// by element one bit for bit over K = 2..64, HW below, at and around the
// block (256) and not a multiple of 4, several images, with and without
// bins, logits beyond the clamp (default 80 and a low MaxLogit of 4),
// ±Inf, underflowing exps and tied maxima.
func TestEpistemicMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 2))
	values := 0
	for _, k := range []int{2, 3, 8, 32, 64} {
		for _, hw := range []int{1, 3, 7, 255, 256, 257, 513, 48*160 + 3} {
			for _, n := range []int{1, 3} {
				if k*hw*n > 2_000_000 {
					n = 1
				}
				for _, maxLogit := range []float64{0, 4} {
					for _, special := range []float64{0, 0.01, 0.3} {
						d := DIDOLoss{K: k, MaxLogit: maxLogit}
						logits := randomLogits(rng, n*k*hw, 3, special)
						name := fmt.Sprintf("K %d, HW %d, N %d, MaxLogit %v, special %v", k, hw, n, maxLogit, special)
						for _, withBins := range []bool{false, true} {
							if err := sameEpistemic(t, name, d, logits, n, hw, withBins); err != nil {
								t.Fatalf("%s: %v", name, err)
							}
							values += len(logits)
						}
					}
				}
			}
		}
	}
	t.Logf("%d logits read out, all bit-identical", values)
}

// TestEpistemicNaN: a NaN anywhere gives the reference's error (the first
// NaN in element order, then class order) and the same values written
// before it; several NaNs in one block and across blocks.
func TestEpistemicNaN(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 3))
	nan := float32(math.NaN())
	for trial := 0; trial < 300; trial++ {
		k := []int{2, 8, 32}[trial%3]
		hw := 1 + rng.IntN(700)
		n := 1 + rng.IntN(3)
		logits := randomLogits(rng, n*k*hw, 3, 0.01)
		for range 1 + rng.IntN(4) {
			logits[rng.IntN(len(logits))] = nan
		}
		name := fmt.Sprintf("trial %d: K %d, HW %d, N %d", trial, k, hw, n)
		if err := sameEpistemic(t, name, DIDOLoss{K: k}, logits, n, hw, trial%2 == 0); err == nil {
			t.Fatalf("%s: no error for a NaN logit", name)
		}
	}
	// The second class's logit of element 300 (second block): earlier
	// elements are written, the message names class 1, element 300.
	logits := randomLogits(rng, 2*512, 3, 0)
	logits[512+300] = nan
	out := make([]float32, 512)
	err := DIDOLoss{K: 2}.Epistemic(logits, 1, 512, out, nil)
	if err == nil || err.Error() != "DIDO read-out: logit of class 1 at element 300 is NaN" {
		t.Fatalf("error %v, want class 1 at element 300", err)
	}
	if out[299] <= 0 || out[299] > 1 || out[300] != 0 {
		t.Fatalf("out[299] = %v, out[300] = %v: want elements before the NaN written, not the NaN's", out[299], out[300])
	}
}

// BenchmarkEpistemic reads out the protocol's shape (K = 32 bins, one
// image of 48x160, logits ~ N(0, 3)): Epistemic against the element by
// element reference.
//
//	go test ./auxue -run '^$' -bench Epistemic -benchmem
func BenchmarkEpistemic(b *testing.B) {
	const k, hw = 32, 48 * 160
	rng := rand.New(rand.NewPCG(1, 2))
	logits := randomLogits(rng, k*hw, 3, 0)
	d := DIDOLoss{K: k}
	out, bins := make([]float32, hw), make([]int32, hw)
	for _, c := range []struct {
		name string
		f    func(DIDOLoss, []float32, int, int, []float32, []int32) error
	}{{"blocked", DIDOLoss.Epistemic}, {"reference", epistemicReference}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.f(d, logits, 1, hw, out, bins); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestEpistemicAllocatesNothing: the block's sums, maxima and classes
// live on the stack.
func TestEpistemicAllocatesNothing(t *testing.T) {
	const k, hw = 8, 1000
	logits := randomLogits(rand.New(rand.NewPCG(5, 6)), k*hw, 3, 0)
	out, bins := make([]float32, hw), make([]int32, hw)
	allocs := testing.AllocsPerRun(20, func() {
		if err := (DIDOLoss{K: k}).Epistemic(logits, 1, hw, out, bins); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Epistemic allocates %v times per call, want 0", allocs)
	}
}
