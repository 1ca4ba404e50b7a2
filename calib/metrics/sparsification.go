package metrics

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// SparsMetric is the error metric a sparsification curve tracks.
type SparsMetric int

const (
	// SparsRMSE is sqrt(mean (d - y)^2) over the kept pixels.
	SparsRMSE SparsMetric = iota
	// SparsAbsRel is mean |d - y| / y over the kept pixels.
	SparsAbsRel
)

func (m SparsMetric) String() string {
	switch m {
	case SparsRMSE:
		return "rmse"
	case SparsAbsRel:
		return "absrel"
	}
	return fmt.Sprintf("SparsMetric(%d)", int(m))
}

// DefaultSparsStep is the removal step the DIDO paper's text uses (5%).
const DefaultSparsStep = 0.05

// Sparsification is the result for one image (Poggi et al., "On the
// uncertainty of self-supervised monocular depth estimation", CVPR 2020):
// pixels are removed in order of decreasing uncertainty at the fractions
// Fractions (0, step, 2*step, ... below 1, then 1, where the empty set scores
// 0) and the metric is computed on the kept pixels (Curve); the oracle
// removes them in order of decreasing true error (Oracle). Areas use the
// trapezoid rule over the removed fraction x in [0, 1]:
//
//	AUSE = area(Curve) - area(Oracle)   (lower is better, >= 0)
//	AURG = Full - area(Curve)           (higher is better; > 0 beats random removal)
//
// where Full is the metric on all pixels (a random ranking's expected curve
// is flat at Full for RMSE^2 and AbsRel).
type Sparsification struct {
	Metric                   SparsMetric
	N                        int // evaluated pixels
	Full                     float64
	AreaCurve, AreaOracle    float64
	AUSE, AURG               float64
	Fractions, Curve, Oracle []float64 // views on the Sparsifier's buffers
}

// Sparsifier computes sparsification curves; it keeps its buffers between
// calls, so a warm Sparsifier allocates nothing. Not safe for concurrent use.
type Sparsifier struct {
	// Step is the removal step in (0, 1); 0 means DefaultSparsStep.
	Step float64

	order         []keyed
	unc, val      []float64
	prefix        []float64
	fractions     []float64
	curve, oracle []float64
}

// Evaluate computes the curves of one image on the pixels with gt > 0 and a
// finite uncertainty. Removal of r = floor(f*n + 1e-9) pixels at fraction f;
// ties in the uncertainty keep pixel order (a stable sort), so the result is
// deterministic. With no valid pixel, N is 0 and the figures are NaN.
func (s *Sparsifier) Evaluate(pred, gt, unc []float32, metric SparsMetric) (Sparsification, error) {
	if len(pred) != len(gt) || len(unc) != len(gt) {
		return Sparsification{}, fmt.Errorf("sparsification: %d predictions, %d ground-truth pixels, %d uncertainties", len(pred), len(gt), len(unc))
	}
	if metric != SparsRMSE && metric != SparsAbsRel {
		return Sparsification{}, fmt.Errorf("sparsification: unknown metric %d", int(metric))
	}
	step := s.Step
	if step == 0 {
		step = DefaultSparsStep
	}
	if !(step > 0 && step < 1) {
		return Sparsification{}, fmt.Errorf("sparsification: step %v, want 0 < step < 1", step)
	}
	s.val, s.unc = s.val[:0], s.unc[:0]
	for i, y := range gt {
		u, d := float64(unc[i]), float64(pred[i])
		if !(y > 0) || math.IsInf(float64(y), 0) || math.IsNaN(u) || math.IsInf(u, 0) || math.IsNaN(d) || math.IsInf(d, 0) {
			continue
		}
		e := d - float64(y)
		if metric == SparsRMSE {
			s.val = append(s.val, e*e) // kept-set RMSE = sqrt(mean of these)
		} else {
			s.val = append(s.val, math.Abs(e)/float64(y))
		}
		s.unc = append(s.unc, u)
	}
	n := len(s.val)
	s.fractions = s.fractions[:0]
	for k := 0; ; k++ {
		f := float64(k) * step
		if f >= 1-1e-9 {
			break
		}
		s.fractions = append(s.fractions, f)
	}
	s.fractions = append(s.fractions, 1)
	res := Sparsification{Metric: metric, N: n, Fractions: s.fractions}
	if n == 0 {
		nan := math.NaN()
		res.Full, res.AreaCurve, res.AreaOracle, res.AUSE, res.AURG = nan, nan, nan, nan, nan
		return res, nil
	}
	s.curve = s.curveFor(s.curve[:0], s.unc, metric)
	s.oracle = s.curveFor(s.oracle[:0], s.val, metric)
	res.Curve, res.Oracle = s.curve, s.oracle
	res.Full = s.curve[0]
	res.AreaCurve = trapezoid(s.fractions, s.curve)
	res.AreaOracle = trapezoid(s.fractions, s.oracle)
	res.AUSE = res.AreaCurve - res.AreaOracle
	res.AURG = res.Full - res.AreaCurve
	return res, nil
}

// curveFor sorts the pixels by increasing key (so the most uncertain, or
// most wrong, come last and are removed first) and evaluates the metric on
// the kept prefix at every fraction.
func (s *Sparsifier) curveFor(dst []float64, key []float64, metric SparsMetric) []float64 {
	n := len(s.val)
	s.order = s.order[:0]
	for i := 0; i < n; i++ {
		s.order = append(s.order, keyed{key[i], int32(i)})
	}
	// Ties broken by pixel index: the order of a stable sort, at the speed
	// of an unstable one.
	slices.SortFunc(s.order, func(a, b keyed) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	if cap(s.prefix) < n+1 {
		s.prefix = make([]float64, n+1)
	}
	s.prefix = s.prefix[:n+1]
	s.prefix[0] = 0
	for i, o := range s.order {
		s.prefix[i+1] = s.prefix[i] + s.val[o.i]
	}
	for _, f := range s.fractions {
		keep := n - int(math.Floor(f*float64(n)+1e-9))
		if keep <= 0 {
			dst = append(dst, 0) // the empty set scores 0
			continue
		}
		m := s.prefix[keep] / float64(keep)
		if metric == SparsRMSE {
			m = math.Sqrt(math.Max(m, 0))
		}
		dst = append(dst, m)
	}
	return dst
}

// keyed is a pixel's sort key and index.
type keyed struct {
	key float64
	i   int32
}

func trapezoid(x, y []float64) float64 {
	var a float64
	for i := 1; i < len(x); i++ {
		a += (x[i] - x[i-1]) * (y[i] + y[i-1]) / 2
	}
	return a
}

// SparsMean averages AUSE, AURG and Full over images (the paper's
// convention); images without valid pixels are skipped.
type SparsMean struct {
	AUSE, AURG, Full float64
	Images           int
}

// Add accumulates one image's result.
func (m *SparsMean) Add(r Sparsification) {
	if r.N == 0 {
		return
	}
	m.AUSE += r.AUSE
	m.AURG += r.AURG
	m.Full += r.Full
	m.Images++
}

// Mean returns the averages (NaN without images).
func (m SparsMean) Mean() (ause, aurg, full float64) {
	if m.Images == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	k := float64(m.Images)
	return m.AUSE / k, m.AURG / k, m.Full / k
}
