package metrics

import (
	"fmt"
	"math"
)

// DefaultUCEBins is the usual bin count (Laves et al., "Well-calibrated
// regression uncertainty in medical imaging with deep learning", MIDL 2020).
const DefaultUCEBins = 15

// UCE is the uncertainty calibration error: the evaluated pixels are put in
// bins equal-width bins of their predicted uncertainty u over [min u, max u],
// and
//
//	UCE = sum_b (|B_b| / N) |mean_{B_b} err - mean_{B_b} u|
//
// with err and u in the same units (for a Laplace scale b, err = |d - y|,
// since E|d - y| = b). Pixels with valid[i] false (valid may be nil: all)
// or non-finite values are skipped. It returns NaN without pixels.
type UCE struct {
	Bins int // 0 means DefaultUCEBins

	count      []int
	sumE, sumU []float64
}

// Evaluate computes the UCE of one set of pixels.
func (c *UCE) Evaluate(errs, unc []float32, valid []bool) (float64, error) {
	if len(errs) != len(unc) || (valid != nil && len(valid) != len(unc)) {
		return 0, fmt.Errorf("uce: %d errors, %d uncertainties, %d mask entries", len(errs), len(unc), len(valid))
	}
	bins := c.Bins
	if bins == 0 {
		bins = DefaultUCEBins
	}
	if bins < 1 {
		return 0, fmt.Errorf("uce: %d bins", bins)
	}
	ok := func(i int) bool {
		e, u := float64(errs[i]), float64(unc[i])
		return (valid == nil || valid[i]) && !math.IsNaN(e) && !math.IsInf(e, 0) && !math.IsNaN(u) && !math.IsInf(u, 0)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, u := range unc {
		if ok(i) {
			lo, hi = math.Min(lo, float64(u)), math.Max(hi, float64(u))
		}
	}
	if lo > hi {
		return math.NaN(), nil
	}
	c.count = resetInts(c.count, bins)
	c.sumE, c.sumU = resetFloats(c.sumE, bins), resetFloats(c.sumU, bins)
	width := (hi - lo) / float64(bins)
	n := 0
	for i, u := range unc {
		if !ok(i) {
			continue
		}
		b := 0
		if width > 0 {
			b = min(int((float64(u)-lo)/width), bins-1) // the maximum falls in the last bin
		}
		c.count[b]++
		c.sumE[b] += float64(errs[i])
		c.sumU[b] += float64(u)
		n++
	}
	var uce float64
	for b := range c.count {
		if k := float64(c.count[b]); k > 0 {
			uce += k / float64(n) * math.Abs(c.sumE[b]/k-c.sumU[b]/k)
		}
	}
	return uce, nil
}

func resetInts(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n)
	}
	s = s[:n]
	clear(s)
	return s
}

func resetFloats(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	s = s[:n]
	clear(s)
	return s
}
