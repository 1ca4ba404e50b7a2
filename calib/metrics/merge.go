package metrics

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
)

// fineKey is the bin of a non-negative value in 1024 equal bins per octave
// (its float64 bits without the low 42 mantissa bits): at most 2^-10 of
// the value wide, fixed, so statistics of shards add exactly.
func fineKey(v float64) uint64 { return math.Float64bits(v) >> 42 }

// UCEStats holds what the 15-bin UCE of the Laplace scale needs after a
// merge: the exact range of the predicted b, and per fine bin of b (fineKey) the
// pixel count and the sums of |e| and b. Scaling every b by the scale
// correction s scales the UCE's equal-width bins with it, so one set of
// statistics gives the UCE before (s = 1) and after any s.
type UCEStats struct {
	Min, Max float64
	bins     map[uint64]*uceBin
}

type uceBin struct{ n, sumE, sumB float64 }

// Add counts one pixel with error e and scale b (both finite, b >= 0).
func (u *UCEStats) Add(e, b float64) {
	if u.bins == nil {
		u.bins = map[uint64]*uceBin{}
		u.Min, u.Max = b, b
	}
	u.Min, u.Max = math.Min(u.Min, b), math.Max(u.Max, b)
	k := fineKey(b)
	c := u.bins[k]
	if c == nil {
		c = &uceBin{}
		u.bins[k] = c
	}
	c.n++
	c.sumE += e
	c.sumB += b
}

// Merge adds o to u.
func (u *UCEStats) Merge(o *UCEStats) {
	if len(o.bins) == 0 {
		return
	}
	if u.bins == nil {
		u.bins = map[uint64]*uceBin{}
		u.Min, u.Max = o.Min, o.Max
	}
	u.Min, u.Max = math.Min(u.Min, o.Min), math.Max(u.Max, o.Max)
	for k, c := range o.bins {
		d := u.bins[k]
		if d == nil {
			d = &uceBin{}
			u.bins[k] = d
		}
		d.n += c.n
		d.sumE += c.sumE
		d.sumB += c.sumB
	}
}

// UCE is the uncertainty calibration error of the scale s*b (calib/metrics'
// definition: `bins` equal-width bins over [s min b, s max b]). Each fine
// bin goes whole to the UCE bin of its mean b: the approximation is that a
// fine bin straddling one of the UCE bins' inner edges (each at most 2^-10
// of its value wide) is not split; the UCE is otherwise exact. NaN without
// pixels.
func (u *UCEStats) UCE(s float64, bins int) float64 {
	if len(u.bins) == 0 {
		return math.NaN()
	}
	count := make([]float64, bins)
	sumE := make([]float64, bins)
	sumU := make([]float64, bins)
	width := (u.Max - u.Min) / float64(bins)
	var n float64
	for _, c := range u.bins {
		i := 0
		if width > 0 {
			i = max(0, min(int((c.sumB/c.n-u.Min)/width), bins-1))
		}
		count[i] += c.n
		sumE[i] += c.sumE
		sumU[i] += s * c.sumB
		n += c.n
	}
	var uce float64
	for i, k := range count {
		if k > 0 {
			uce += k / n * math.Abs(sumE[i]/k-sumU[i]/k)
		}
	}
	return uce
}

type uceJSON struct {
	Min    float64   `json:"min_b"`
	Max    float64   `json:"max_b"`
	Keys   []uint64  `json:"keys"`
	Counts []float64 `json:"counts"`
	SumE   []float64 `json:"sum_abs_err"`
	SumB   []float64 `json:"sum_b"`
}

// MarshalJSON writes the range and the non-empty bins, sorted.
func (u UCEStats) MarshalJSON() ([]byte, error) {
	j := uceJSON{Min: u.Min, Max: u.Max, Keys: []uint64{}, Counts: []float64{}, SumE: []float64{}, SumB: []float64{}}
	for k := range u.bins {
		j.Keys = append(j.Keys, k)
	}
	slices.Sort(j.Keys)
	for _, k := range j.Keys {
		c := u.bins[k]
		j.Counts, j.SumE, j.SumB = append(j.Counts, c.n), append(j.SumE, c.sumE), append(j.SumB, c.sumB)
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads MarshalJSON's form.
func (u *UCEStats) UnmarshalJSON(b []byte) error {
	var j uceJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if len(j.Keys) != len(j.Counts) || len(j.Keys) != len(j.SumE) || len(j.Keys) != len(j.SumB) {
		return fmt.Errorf("uce statistics: %d keys, %d counts, %d error sums, %d scale sums", len(j.Keys), len(j.Counts), len(j.SumE), len(j.SumB))
	}
	*u = UCEStats{Min: j.Min, Max: j.Max}
	if len(j.Keys) == 0 {
		return nil
	}
	if !(j.Min <= j.Max) {
		return fmt.Errorf("uce statistics: min_b %g > max_b %g", j.Min, j.Max)
	}
	u.bins = map[uint64]*uceBin{}
	for i, k := range j.Keys {
		if !(j.Counts[i] > 0) || math.IsInf(j.Counts[i], 0) {
			return fmt.Errorf("uce statistics: count %g of key %d", j.Counts[i], k)
		}
		if _, dup := u.bins[k]; dup {
			return fmt.Errorf("uce statistics: key %d twice", k)
		}
		u.bins[k] = &uceBin{n: j.Counts[i], sumE: j.SumE[i], sumB: j.SumB[i]}
	}
	return nil
}

// Merge adds o's images to m.
func (m *SparsMean) Merge(o SparsMean) {
	m.AUSE += o.AUSE
	m.AURG += o.AURG
	m.Full += o.Full
	m.Images += o.Images
}

// DepthSums is a DepthMean's state: the per-image sums and the image
// count, for a mergeable summary.
type DepthSums struct {
	Sum    DepthQuality `json:"sum"`
	Images int          `json:"images"`
}

// Sums returns m's state.
func (m *DepthMean) Sums() DepthSums { return DepthSums{Sum: m.sum, Images: m.Images} }

// MergeSums adds a state (Sums of another DepthMean) to m.
func (m *DepthMean) MergeSums(o DepthSums) {
	m.sum.add(o.Sum)
	m.Images += o.Images
}

// ScoreBits is ScoreHist's resolution: the top ScoreBits mantissa bits of
// a float32 score are kept, 1024 bins per octave.
const ScoreBits = 10

// ScoreHist is the mergeable form of BinaryScores: per fixed score bin
// (the order-preserving key of the float32 score without its low
// 23-ScoreBits mantissa bits) the counts of positives and negatives.
// Histograms of shards add exactly. AUC and AUPR treat a bin as one group
// of tied scores; AUCTieBound bounds what that changes.
type ScoreHist struct {
	bins map[uint32]*[2]int64 // [positives, negatives]
}

// Add counts one finite score (non-finite scores are skipped: false).
func (h *ScoreHist) Add(score float32, positive bool) bool {
	if math.IsNaN(float64(score)) || math.IsInf(float64(score), 0) {
		return false
	}
	if h.bins == nil {
		h.bins = map[uint32]*[2]int64{}
	}
	k := scoreKey(score) >> (23 - ScoreBits)
	c := h.bins[k]
	if c == nil {
		c = &[2]int64{}
		h.bins[k] = c
	}
	if positive {
		c[0]++
	} else {
		c[1]++
	}
	return true
}

// AddMasked counts scores[i] for every i with mask[i], all of one class.
func (h *ScoreHist) AddMasked(scores []float32, mask []bool, positive bool) {
	for i, m := range mask {
		if m {
			h.Add(scores[i], positive)
		}
	}
}

// Merge adds o to h.
func (h *ScoreHist) Merge(o *ScoreHist) {
	for k, c := range o.bins {
		if h.bins == nil {
			h.bins = map[uint32]*[2]int64{}
		}
		d := h.bins[k]
		if d == nil {
			d = &[2]int64{}
			h.bins[k] = d
		}
		d[0] += c[0]
		d[1] += c[1]
	}
}

// Counts returns the positives and negatives counted.
func (h *ScoreHist) Counts() (pos, neg int64) {
	for _, c := range h.bins {
		pos += c[0]
		neg += c[1]
	}
	return pos, neg
}

func (h *ScoreHist) sortedKeys() []uint32 {
	ks := make([]uint32, 0, len(h.bins))
	for k := range h.bins {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// AUC is BinaryScores.AUC with each bin one group of ties: P(positive
// above negative) + P(same bin)/2. NaN without both classes.
func (h *ScoreHist) AUC() float64 {
	P, N := h.Counts()
	if P == 0 || N == 0 {
		return math.NaN()
	}
	var above, negBelow float64
	for _, k := range h.sortedKeys() {
		c := h.bins[k]
		above += float64(c[0]) * (negBelow + float64(c[1])/2)
		negBelow += float64(c[1])
	}
	return above / (float64(P) * float64(N))
}

// AUCTieBound bounds |AUC of the scores - AUC of the histogram|: the two
// differ only on positive-negative pairs in one bin, which the histogram
// counts one half each and the scores 0, 1/2 or 1, so the difference is
// at most half the share of such pairs.
func (h *ScoreHist) AUCTieBound() float64 {
	P, N := h.Counts()
	if P == 0 || N == 0 {
		return math.NaN()
	}
	var same float64
	for _, c := range h.bins {
		same += float64(c[0]) * float64(c[1])
	}
	return same / 2 / (float64(P) * float64(N))
}

// AUPR is BinaryScores.AUPR (average precision) with each bin one group of
// ties. NaN without positives.
func (h *ScoreHist) AUPR() float64 {
	P, _ := h.Counts()
	if P == 0 {
		return math.NaN()
	}
	ks := h.sortedKeys()
	var ap, prevRecall float64
	var tp, fp int64
	for i := len(ks) - 1; i >= 0; i-- {
		c := h.bins[ks[i]]
		tp += c[0]
		fp += c[1]
		recall := float64(tp) / float64(P)
		ap += (recall - prevRecall) * float64(tp) / float64(tp+fp)
		prevRecall = recall
	}
	return ap
}

type scoreHistJSON struct {
	Keys []uint32 `json:"keys"`
	Pos  []int64  `json:"pos"`
	Neg  []int64  `json:"neg"`
}

// MarshalJSON writes the non-empty bins, sorted.
func (h ScoreHist) MarshalJSON() ([]byte, error) {
	j := scoreHistJSON{Keys: h.sortedKeys(), Pos: []int64{}, Neg: []int64{}}
	for _, k := range j.Keys {
		j.Pos, j.Neg = append(j.Pos, h.bins[k][0]), append(j.Neg, h.bins[k][1])
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads MarshalJSON's form.
func (h *ScoreHist) UnmarshalJSON(b []byte) error {
	var j scoreHistJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if len(j.Keys) != len(j.Pos) || len(j.Keys) != len(j.Neg) {
		return fmt.Errorf("score histogram: %d keys, %d positive and %d negative counts", len(j.Keys), len(j.Pos), len(j.Neg))
	}
	*h = ScoreHist{}
	for i, k := range j.Keys {
		if i > 0 && k <= j.Keys[i-1] {
			return fmt.Errorf("score histogram: keys not increasing at %d", i)
		}
		if j.Pos[i] < 0 || j.Neg[i] < 0 {
			return fmt.Errorf("score histogram: negative count at key %d", k)
		}
		if h.bins == nil {
			h.bins = map[uint32]*[2]int64{}
		}
		h.bins[k] = &[2]int64{j.Pos[i], j.Neg[i]}
	}
	return nil
}
