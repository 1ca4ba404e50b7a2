package gradcheck

import (
	"fmt"
	"math"
)

// NumericGrad returns the central-difference gradient of f with respect to
// each element of x: (f(x+h) − f(x−h)) / (2h) per element, where h is eps
// rounded to what float32 can represent around x[i] (the true step is used in
// the quotient). f must read x; x is restored after each probe.
func NumericGrad(f func() float64, x []float32, eps float64) []float64 {
	g := make([]float64, len(x))
	for i := range x {
		orig := x[i]
		hi := float32(float64(orig) + eps)
		lo := float32(float64(orig) - eps)
		x[i] = hi
		fp := f()
		x[i] = lo
		fm := f()
		x[i] = orig
		g[i] = (fp - fm) / (float64(hi) - float64(lo))
	}
	return g
}

// Tolerance accepts an element when |analytic − numeric| ≤ Abs + Rel·max(|analytic|, |numeric|).
type Tolerance struct {
	Rel, Abs float64
}

// Report summarizes a comparison.
type Report struct {
	// Worst is the index with the largest error relative to its tolerance
	// (-1 when there are no elements); Ratio is that error over the tolerance
	// (≤ 1 passes).
	Worst             int
	Ratio             float64
	Analytic, Numeric float64
	// MaxAbsErr is the largest |analytic − numeric| over all elements.
	MaxAbsErr float64
}

// Compare measures analytic against numeric gradients element by element.
func Compare(analytic []float32, numeric []float64, tol Tolerance) (Report, error) {
	r := Report{Worst: -1}
	if len(analytic) != len(numeric) {
		return r, fmt.Errorf("gradcheck: %d analytic values, %d numeric", len(analytic), len(numeric))
	}
	for i, a32 := range analytic {
		a, n := float64(a32), numeric[i]
		diff := math.Abs(a - n)
		if math.IsNaN(diff) {
			return Report{Worst: i, Ratio: math.Inf(1), Analytic: a, Numeric: n, MaxAbsErr: math.Inf(1)}, nil
		}
		r.MaxAbsErr = max(r.MaxAbsErr, diff)
		allowed := tol.Abs + tol.Rel*max(math.Abs(a), math.Abs(n))
		ratio := diff / allowed
		if allowed == 0 {
			ratio = 0
			if diff > 0 {
				ratio = math.Inf(1)
			}
		}
		if r.Worst < 0 || ratio > r.Ratio {
			r.Worst, r.Ratio, r.Analytic, r.Numeric = i, ratio, a, n
		}
	}
	return r, nil
}

// Check returns an error naming the worst index when any element is outside
// the tolerance.
func Check(analytic []float32, numeric []float64, tol Tolerance) error {
	r, err := Compare(analytic, numeric, tol)
	if err != nil {
		return err
	}
	if r.Ratio > 1 {
		return fmt.Errorf("gradcheck: element %d: analytic %.6g, numeric %.6g (error %.3g× the tolerance rel %g abs %g)",
			r.Worst, r.Analytic, r.Numeric, r.Ratio, tol.Rel, tol.Abs)
	}
	return nil
}
