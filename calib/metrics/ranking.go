package metrics

import (
	"fmt"
	"math"
	"slices"
)

// BinaryScores pools scored samples of two classes (pixels or images) for
// AUC and AUPR, with the out-of-distribution class as the positive class and
// the uncertainty as the score (higher = more likely OOD). Reset it to reuse
// its buffers. Not safe for concurrent use.
//
// A sample is stored as one uint64: the score's order-preserving key in the
// high bits and the class in the lowest bit, so that a radix sort orders the
// pool by score in linear time (the evaluation pools millions of pixels per
// method and condition) and tied scores stay adjacent.
type BinaryScores struct {
	items   []uint64
	scratch []uint64
	pos     int
	sorted  bool
}

// scoreKey maps a finite float32 to a uint32 with the same order (IEEE 754
// sign-magnitude to unsigned: flip all bits of negatives, the sign bit of
// the rest). -0 is first made +0, as the two compare equal.
func scoreKey(s float32) uint32 {
	if s == 0 {
		s = 0
	}
	b := math.Float32bits(s)
	if b&(1<<31) != 0 {
		return ^b
	}
	return b | 1<<31
}

// sample packs a score key and a class into one sortable word.
func sample(s float32, positive bool) uint64 {
	v := uint64(scoreKey(s)) << 1
	if positive {
		v |= 1
	}
	return v
}

// Add records one sample; non-finite scores are an error (they have no rank).
func (b *BinaryScores) Add(score float32, positive bool) error {
	if math.IsNaN(float64(score)) || math.IsInf(float64(score), 0) {
		return fmt.Errorf("binary scores: score %v is not finite", score)
	}
	b.items = append(b.items, sample(score, positive))
	if positive {
		b.pos++
	}
	b.sorted = false
	return nil
}

// AddMasked records scores[i] for every i with mask[i], all of one class;
// non-finite scores are skipped and counted in the return value.
func (b *BinaryScores) AddMasked(scores []float32, mask []bool, positive bool) (skipped int, err error) {
	if len(mask) != len(scores) {
		return 0, fmt.Errorf("binary scores: %d scores, %d mask entries", len(scores), len(mask))
	}
	n := 0
	for _, m := range mask {
		if m {
			n++
		}
	}
	b.items = slices.Grow(b.items, n)
	added := 0
	for i, s := range scores {
		if !mask[i] {
			continue
		}
		if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
			skipped++
			continue
		}
		b.items = append(b.items, sample(s, positive))
		added++
	}
	if positive {
		b.pos += added
	}
	b.sorted = false
	return skipped, nil
}

// Reset empties the pool, keeping its buffers.
func (b *BinaryScores) Reset() { b.items, b.pos, b.sorted = b.items[:0], 0, false }

// Counts returns the number of positive and negative samples.
func (b *BinaryScores) Counts() (pos, neg int) { return b.pos, len(b.items) - b.pos }

func (b *BinaryScores) sort() error {
	if b.pos == 0 || b.pos == len(b.items) {
		return fmt.Errorf("binary scores: need both classes, have %d positive and %d negative", b.pos, len(b.items)-b.pos)
	}
	if !b.sorted {
		if cap(b.scratch) < len(b.items) {
			b.scratch = make([]uint64, len(b.items))
		}
		radixSort33(b.items, b.scratch[:len(b.items)])
		b.sorted = true
	}
	return nil
}

// radixSort33 sorts the 33-bit words of a (key and class bit) in place with
// three stable 11-bit counting passes through tmp (len(tmp) == len(a)).
func radixSort33(a, tmp []uint64) {
	const bits, buckets = 11, 1 << 11
	var count [buckets]int
	src, dst := a, tmp
	for shift := 0; shift < 33; shift += bits {
		clear(count[:])
		for _, v := range src {
			count[(v>>shift)&(buckets-1)]++
		}
		sum := 0
		for i, c := range count {
			count[i] = sum
			sum += c
		}
		for _, v := range src {
			d := (v >> shift) & (buckets - 1)
			dst[count[d]] = v
			count[d]++
		}
		src, dst = dst, src
	}
	// Three passes leave the result in tmp.
	copy(a, src)
}

// score of a stored sample, for the tie test (equal keys = equal scores).
func key(v uint64) uint64 { return v >> 1 }

// AUC is the area under the ROC curve, computed from ranks (the
// Mann-Whitney U statistic; Hanley & McNeil 1982): with R the sum of the
// positives' ranks in increasing score order, tied scores sharing their
// average rank,
//
//	AUC = (R - P(P+1)/2) / (P N).
//
// This equals the probability that a random positive scores above a random
// negative, ties counting one half, i.e. the trapezoidal ROC area.
func (b *BinaryScores) AUC() (float64, error) {
	if err := b.sort(); err != nil {
		return math.NaN(), err
	}
	var rankSum float64
	n := len(b.items)
	for i := 0; i < n; {
		j := i
		p := 0
		for j < n && key(b.items[j]) == key(b.items[i]) {
			if b.items[j]&1 == 1 {
				p++
			}
			j++
		}
		// ranks i+1 .. j share the average (i+1+j)/2
		rankSum += float64(p) * float64(i+1+j) / 2
		i = j
	}
	P, N := float64(b.pos), float64(n-b.pos)
	return (rankSum - P*(P+1)/2) / (P * N), nil
}

// AUPR is the area under the precision-recall curve as average precision
// (the step-wise sum scikit-learn's average_precision_score computes):
// thresholds are the distinct scores from high to low, and
//
//	AP = sum_k (R_k - R_{k-1}) P_k
//
// with P_k and R_k the precision and recall of "score >= threshold k". A
// group of tied scores enters at once, so ties never favour either class.
// AP does not interpolate between points (no trapezoid), which would be
// optimistic (Davis & Goadrich 2006).
func (b *BinaryScores) AUPR() (float64, error) {
	if err := b.sort(); err != nil {
		return math.NaN(), err
	}
	var ap float64
	tp, fp := 0, 0
	prevRecall := 0.0
	P := float64(b.pos)
	for j := len(b.items) - 1; j >= 0; {
		i := j
		for i >= 0 && key(b.items[i]) == key(b.items[j]) {
			if b.items[i]&1 == 1 {
				tp++
			} else {
				fp++
			}
			i--
		}
		recall := float64(tp) / P
		precision := float64(tp) / float64(tp+fp)
		ap += (recall - prevRecall) * precision
		prevRecall = recall
		j = i
	}
	return ap, nil
}
