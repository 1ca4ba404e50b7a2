package metrics

import (
	"fmt"
	"math"
)

// DepthQuality holds the standard monocular depth metrics (Eigen et al.,
// "Depth Map Prediction from a Single Image using a Multi-Scale Deep
// Network", NeurIPS 2014; the KITTI / BTS evaluation) over the valid pixels
// of one image, with d the prediction and y the ground truth:
//
//	AbsRel  = mean |d - y| / y
//	SqRel   = mean (d - y)^2 / y
//	RMSE    = sqrt(mean (d - y)^2)
//	RMSELog = sqrt(mean (ln d - ln y)^2)
//	Log10   = mean |log10 d - log10 y|
//	DeltaK  = fraction of pixels with max(d/y, y/d) < 1.25^k, k = 1, 2, 3
type DepthQuality struct {
	AbsRel, SqRel, RMSE, RMSELog, Log10 float64
	Delta1, Delta2, Delta3              float64
	N                                   int // valid pixels
}

// DepthRange selects the evaluated pixels and clamps predictions, as the
// KITTI protocol does (BTS: min 1e-3, max 80 m).
type DepthRange struct {
	Min, Max float32 // Max 0 means no upper bound
}

// KITTIRange is the usual outdoor evaluation range.
var KITTIRange = DepthRange{Min: 1e-3, Max: 80}

func (r DepthRange) valid(y float32) bool {
	return y > r.Min && y > 0 && (r.Max == 0 || y <= r.Max) && !math.IsInf(float64(y), 0)
}

func (r DepthRange) clamp(d float32) float32 {
	lo := r.Min
	if lo <= 0 {
		lo = 1e-3
	}
	if !(d >= lo) { // also catches NaN
		d = lo
	}
	if r.Max > 0 && d > r.Max {
		d = r.Max
	}
	return d
}

// Depth evaluates pred against gt on the pixels whose ground truth lies in
// rng; predictions are clamped into the range (never below 1e-3, so the
// logarithms stay finite). With no valid pixel N is 0 and the metrics NaN.
func Depth(pred, gt []float32, rng DepthRange) (DepthQuality, error) {
	if len(pred) != len(gt) {
		return DepthQuality{}, fmt.Errorf("depth metrics: %d predictions for %d ground-truth pixels", len(pred), len(gt))
	}
	var q DepthQuality
	var absRel, sqRel, sq, sqLog, log10 float64
	var d1, d2, d3 int
	for i, y := range gt {
		if !rng.valid(y) {
			continue
		}
		d := float64(rng.clamp(pred[i]))
		t := float64(y)
		e := d - t
		absRel += math.Abs(e) / t
		sqRel += e * e / t
		sq += e * e
		l := math.Log(d) - math.Log(t)
		sqLog += l * l
		log10 += math.Abs(math.Log10(d) - math.Log10(t))
		ratio := math.Max(d/t, t/d)
		if ratio < 1.25 {
			d1++
		}
		if ratio < 1.25*1.25 {
			d2++
		}
		if ratio < 1.25*1.25*1.25 {
			d3++
		}
		q.N++
	}
	if q.N == 0 {
		nan := math.NaN()
		return DepthQuality{AbsRel: nan, SqRel: nan, RMSE: nan, RMSELog: nan, Log10: nan, Delta1: nan, Delta2: nan, Delta3: nan}, nil
	}
	n := float64(q.N)
	q.AbsRel, q.SqRel, q.RMSE = absRel/n, sqRel/n, math.Sqrt(sq/n)
	q.RMSELog, q.Log10 = math.Sqrt(sqLog/n), log10/n
	q.Delta1, q.Delta2, q.Delta3 = float64(d1)/n, float64(d2)/n, float64(d3)/n
	return q, nil
}

// DepthMean averages per-image DepthQuality values (the KITTI convention:
// metrics per image, then the mean over images). Images without valid
// pixels are skipped.
type DepthMean struct {
	sum    DepthQuality
	Images int
}

// Add accumulates one image.
func (m *DepthMean) Add(q DepthQuality) {
	if q.N == 0 {
		return
	}
	m.sum.add(q)
	m.Images++
}

// add adds every metric of q (and its pixel count) to s: the one place
// that lists the fields, for Add and MergeSums.
func (s *DepthQuality) add(q DepthQuality) {
	s.AbsRel += q.AbsRel
	s.SqRel += q.SqRel
	s.RMSE += q.RMSE
	s.RMSELog += q.RMSELog
	s.Log10 += q.Log10
	s.Delta1 += q.Delta1
	s.Delta2 += q.Delta2
	s.Delta3 += q.Delta3
	s.N += q.N
}

// Mean returns the per-image average (N is the total pixel count); NaN
// metrics without images.
func (m *DepthMean) Mean() DepthQuality {
	if m.Images == 0 {
		nan := math.NaN()
		return DepthQuality{AbsRel: nan, SqRel: nan, RMSE: nan, RMSELog: nan, Log10: nan, Delta1: nan, Delta2: nan, Delta3: nan}
	}
	k := float64(m.Images)
	s := m.sum
	return DepthQuality{AbsRel: s.AbsRel / k, SqRel: s.SqRel / k, RMSE: s.RMSE / k, RMSELog: s.RMSELog / k,
		Log10: s.Log10 / k, Delta1: s.Delta1 / k, Delta2: s.Delta2 / k, Delta3: s.Delta3 / k, N: s.N}
}
