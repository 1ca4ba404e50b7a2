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
//
// An evaluation calls it for many maps of the same image: every method's
// uncertainty against one depth (the oracle, which only depends on the
// depth's errors, is the same for all of them) and each map twice (RMSE and
// AbsRel: the removal order is the same). It keeps the last orders and
// oracle curves with the values they were computed from and reuses them when
// the new values are equal, element by element; the results are the same as
// without the reuse.
type Sparsifier struct {
	// Step is the removal step in (0, 1); 0 means DefaultSparsStep.
	Step float64

	order      []keyed
	unc, val   []float64
	prefix     []float64
	fractions  []float64
	curve      []float64
	radix      []uint64 // (key, pixel) words of the uncertainty order, and scratch
	uncOrder   []int32  // pixels by increasing uncertainty, ties by index
	lastUnc    []float64
	lastOracle [2]struct {
		val, curve []float64
		step       float64
	}
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
	s.curve = s.curveAlong(s.curve[:0], s.uncertaintyOrder(), metric)
	oracle := s.oracleCurve(metric, step)
	res.Curve, res.Oracle = s.curve, oracle
	res.Full = s.curve[0]
	res.AreaCurve = trapezoid(s.fractions, s.curve)
	res.AreaOracle = trapezoid(s.fractions, oracle)
	res.AUSE = res.AreaCurve - res.AreaOracle
	res.AURG = res.Full - res.AreaCurve
	return res, nil
}

// uncertaintyOrder returns the pixels (indices into s.val) by increasing
// uncertainty, ties by pixel index: a stable LSD radix sort on the
// uncertainties' order-preserving 32-bit keys (they are float32 values), so
// the order is exactly the comparison sort's. The last order is reused when
// the uncertainties are the same.
func (s *Sparsifier) uncertaintyOrder() []int32 {
	n := len(s.unc)
	if slices.Equal(s.unc, s.lastUnc) && len(s.uncOrder) == n {
		return s.uncOrder
	}
	s.lastUnc = append(s.lastUnc[:0], s.unc...)
	if cap(s.radix) < 2*n {
		s.radix = make([]uint64, 2*n)
	}
	a, tmp := s.radix[:n], s.radix[n:2*n]
	for i, u := range s.unc {
		a[i] = uint64(sortKey32(float32(u)))<<32 | uint64(i)
	}
	// Three 11-bit passes over the key (bits 32..63); the pixel index in the
	// low bits is already in increasing order and the passes are stable.
	src := radixPasses(a, tmp, 32)
	s.uncOrder = s.uncOrder[:0]
	for _, v := range src {
		s.uncOrder = append(s.uncOrder, int32(uint32(v)))
	}
	return s.uncOrder
}

// sortKey32 maps a float32 to a uint32 of the same order, ±0 to one key (as
// the comparison sort treats them): scoreKey.
func sortKey32(f float32) uint32 { return scoreKey(f) }

// oracleCurve returns the curve of removal by decreasing true error, reusing
// the last one of this metric when the errors (s.val) and the step are the
// same: every uncertainty map of one image and depth shares it.
func (s *Sparsifier) oracleCurve(metric SparsMetric, step float64) []float64 {
	c := &s.lastOracle[metric]
	if c.step == step && len(c.curve) > 0 && slices.Equal(c.val, s.val) {
		return c.curve
	}
	n := len(s.val)
	s.order = s.order[:0]
	for i := 0; i < n; i++ {
		s.order = append(s.order, keyed{s.val[i], int32(i)})
	}
	// Ties broken by pixel index: the order of a stable sort, at the speed
	// of an unstable one.
	slices.SortFunc(s.order, func(a, b keyed) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	c.val = append(c.val[:0], s.val...)
	c.step = step
	c.curve = s.curveAlongKeyed(c.curve[:0], s.order, metric)
	return c.curve
}

// curveAlong evaluates the metric on the kept prefix of the pixels in the
// given order (the last ones are removed first) at every fraction.
func (s *Sparsifier) curveAlong(dst []float64, order []int32, metric SparsMetric) []float64 {
	n := len(s.val)
	if cap(s.prefix) < n+1 {
		s.prefix = make([]float64, n+1)
	}
	s.prefix = s.prefix[:n+1]
	s.prefix[0] = 0
	for i, o := range order {
		s.prefix[i+1] = s.prefix[i] + s.val[o]
	}
	return s.fromPrefix(dst, metric)
}

func (s *Sparsifier) curveAlongKeyed(dst []float64, order []keyed, metric SparsMetric) []float64 {
	n := len(s.val)
	if cap(s.prefix) < n+1 {
		s.prefix = make([]float64, n+1)
	}
	s.prefix = s.prefix[:n+1]
	s.prefix[0] = 0
	for i, o := range order {
		s.prefix[i+1] = s.prefix[i] + s.val[o.i]
	}
	return s.fromPrefix(dst, metric)
}

func (s *Sparsifier) fromPrefix(dst []float64, metric SparsMetric) []float64 {
	n := len(s.val)
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
