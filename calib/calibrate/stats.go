package calibrate

import (
	"math"
	"slices"

	"github.com/didoedge/didoedge/calib/metrics"
)

// Quantile returns the q-quantile of v by nearest rank: the ceil(q n)-th
// smallest value (the smallest t with at least a fraction q of v <= t).
// v is sorted in place. It returns NaN for an empty v.
func Quantile(v []float32, q float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	k := int(math.Ceil(q*float64(len(v)))) - 1
	k = max(0, min(k, len(v)-1))
	return float64(v[k])
}

// LaplaceHalfWidth is the half-width, in units of b, of the central
// interval of a Laplace(mu, b) holding probability coverage:
// P(|X - mu| <= t) = 1 - exp(-t/b), so t = b ln(1/(1-coverage)).
func LaplaceHalfWidth(coverage float64) float64 { return math.Log(1 / (1 - coverage)) }

// Coverage is the fraction of pixels whose absolute error lies inside the
// central Laplace interval of scale corr*b at the nominal coverage.
func Coverage(absErr, b []float32, corr, coverage float64) float64 {
	if len(absErr) == 0 {
		return math.NaN()
	}
	l := LaplaceHalfWidth(coverage) * corr
	in := 0
	for i, e := range absErr {
		if float64(e) <= l*float64(b[i]) {
			in++
		}
	}
	return float64(in) / float64(len(absErr))
}

// ScaleCorrection is the factor s that makes the interval of scale s*b
// cover exactly the nominal fraction of the pixels: the coverage-quantile
// of |e| / (b ln(1/(1-coverage))). If the errors really are Laplace with
// scale k*b, s converges to k.
func ScaleCorrection(absErr, b []float32, coverage float64) float64 {
	l := LaplaceHalfWidth(coverage)
	r := make([]float64, 0, len(absErr))
	for i, e := range absErr {
		if b[i] > 0 {
			r = append(r, float64(e)/(float64(b[i])*l))
		}
	}
	if len(r) == 0 {
		return math.NaN()
	}
	// In float64: a ratio rounded to float32 could fall below the pixel
	// it comes from and leave that pixel outside the interval.
	slices.Sort(r)
	k := max(0, min(int(math.Ceil(coverage*float64(len(r))))-1, len(r)-1))
	return r[k] * (1 + 1e-12)
}

// UCE is the uncertainty calibration error (calib/metrics, 15 bins) of the
// Laplace scale corr*b against the absolute error: E|e| = b for a Laplace.
func UCE(absErr, b []float32, corr float64) (float64, error) {
	u := make([]float32, len(b))
	for i, v := range b {
		u[i] = float32(corr * float64(v))
	}
	var m metrics.UCE
	return m.Evaluate(absErr, u, nil)
}
