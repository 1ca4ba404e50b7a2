package metrics

import (
	"fmt"
	"math"
)

// Alignment is the per-frame scale s and shift t that map a relative
// (affine-invariant) inverse depth r to metric inverse depth: 1/d = s r + t.
type Alignment struct {
	S, T float64
	N    int // ground-truth pixels the fit used
}

// AlignInverseDepth fits s and t by least squares in inverse-depth space
// over the pixels with ground truth (gt > 0, finite r), as MiDaS and Depth
// Anything are evaluated: minimize sum_i (s r_i + t - 1/y_i)^2, whose
// closed form is
//
//	s = cov(r, z) / var(r),  t = mean(z) - s mean(r),  z = 1/y.
//
// It needs two pixels with different r.
func AlignInverseDepth(r, gt []float32) (Alignment, error) {
	if len(r) != len(gt) {
		return Alignment{}, fmt.Errorf("align: %d predictions for %d ground-truth pixels", len(r), len(gt))
	}
	var n int
	var sr, sz float64
	for i, y := range gt {
		if v := float64(r[i]); y > 0 && !math.IsNaN(v) && !math.IsInf(v, 0) {
			sr += v
			sz += 1 / float64(y)
			n++
		}
	}
	if n < 2 {
		return Alignment{N: n}, fmt.Errorf("align: %d ground-truth pixels, need at least 2", n)
	}
	mr, mz := sr/float64(n), sz/float64(n)
	var crz, crr float64
	for i, y := range gt {
		if v := float64(r[i]); y > 0 && !math.IsNaN(v) && !math.IsInf(v, 0) {
			dr := v - mr
			crz += dr * (1/float64(y) - mz)
			crr += dr * dr
		}
	}
	if !(crr > 0) {
		return Alignment{N: n}, fmt.Errorf("align: the prediction is constant on the %d ground-truth pixels", n)
	}
	s := crz / crr
	return Alignment{S: s, T: mz - s*mr, N: n}, nil
}

// Apply writes the aligned metric depth d = 1/max(s r + t, 1/maxDepth)
// into dst: an inverse depth below 1/maxDepth (or negative, beyond
// infinity) is clamped to maxDepth, the usual convention; non-finite r
// gives 0 (no depth).
func (a Alignment) Apply(r, dst []float32, maxDepth float64) {
	floor := 1 / maxDepth
	for i, v := range r {
		z := a.S*float64(v) + a.T
		switch {
		case math.IsNaN(z) || math.IsInf(z, 0):
			dst[i] = 0
		default:
			dst[i] = float32(1 / math.Max(z, floor))
		}
	}
}
