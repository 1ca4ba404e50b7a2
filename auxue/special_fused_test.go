package auxue

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The fused recurrence must return exactly Digamma's and Trigamma's values
// (the DIDO loss switched to it without changing a bit of its gradients).
func TestDigammaTrigammaFusedIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	xs := []float64{math.SmallestNonzeroFloat64, 1e-300, 0.5, 1, 1.5, 9.999999999, 10, 10.5, 33, 1e6, 1e300, math.Inf(1), 0, -1, math.NaN()}
	for range 10000 {
		xs = append(xs, math.Exp(rng.Float64()*12-6))
	}
	for _, x := range xs {
		psi, tri := digammaTrigamma(x)
		wp, wt := Digamma(x), Trigamma(x)
		same := func(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }
		if !same(psi, wp) || !same(tri, wt) {
			t.Fatalf("x = %v: fused (%v, %v), separate (%v, %v)", x, psi, tri, wp, wt)
		}
	}
}
