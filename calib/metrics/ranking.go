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
// Each class is stored as the scores' order-preserving 32-bit keys (4 bytes
// a sample: the evaluation pools millions of pixels per method, condition
// and seed), radix-sorted in linear time when an area is asked for, and the
// two sorted lists are merged so that tied scores of both classes form one
// group, exactly as in one sorted pool.
type BinaryScores struct {
	pos, neg []uint32
	own      SortBuffer
	shared   *SortBuffer
	sorted   bool
}

// SortBuffer is the scratch space of the radix sort. Pools that are never
// sorted at the same time can share one (UseBuffer), so that a set of pools
// needs one buffer as large as its largest class instead of one per pool.
type SortBuffer struct{ tmp []uint32 }

// UseBuffer makes b sort through s instead of a buffer of its own (nil:
// its own again). The caller keeps pools that share s from sorting
// concurrently.
func (b *BinaryScores) UseBuffer(s *SortBuffer) {
	b.shared = s
	b.own.tmp = nil
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

func (b *BinaryScores) class(positive bool) *[]uint32 {
	if positive {
		return &b.pos
	}
	return &b.neg
}

// Add records one sample; non-finite scores are an error (they have no rank).
func (b *BinaryScores) Add(score float32, positive bool) error {
	if math.IsNaN(float64(score)) || math.IsInf(float64(score), 0) {
		return fmt.Errorf("binary scores: score %v is not finite", score)
	}
	c := b.class(positive)
	*c = append(*c, scoreKey(score))
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
	c := b.class(positive)
	*c = slices.Grow(*c, n)
	for i, s := range scores {
		if !mask[i] {
			continue
		}
		if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
			skipped++
			continue
		}
		*c = append(*c, scoreKey(s))
	}
	b.sorted = false
	return skipped, nil
}

// Reset empties the pool, keeping its buffers.
func (b *BinaryScores) Reset() { b.pos, b.neg, b.sorted = b.pos[:0], b.neg[:0], false }

// Release empties the pool and drops its buffers (a pool that will not be
// filled again).
func (b *BinaryScores) Release() { b.pos, b.neg, b.own.tmp, b.sorted = nil, nil, nil, false }

// Counts returns the number of positive and negative samples.
func (b *BinaryScores) Counts() (pos, neg int) { return len(b.pos), len(b.neg) }

func (b *BinaryScores) sort() error {
	if len(b.pos) == 0 || len(b.neg) == 0 {
		return fmt.Errorf("binary scores: need both classes, have %d positive and %d negative", len(b.pos), len(b.neg))
	}
	if !b.sorted {
		buf := &b.own
		if b.shared != nil {
			buf = b.shared
		}
		need := max(len(b.pos), len(b.neg))
		if cap(buf.tmp) < need {
			buf.tmp = make([]uint32, need)
		}
		radixSort32(b.pos, buf.tmp[:len(b.pos)])
		radixSort32(b.neg, buf.tmp[:len(b.neg)])
		b.sorted = true
	}
	return nil
}

// radixSort32 sorts a in place with three stable 11-bit counting passes
// through tmp (len(tmp) == len(a)).
func radixSort32(a, tmp []uint32) {
	// Three passes leave the result in tmp.
	copy(a, radixPasses(a, tmp, 0))
}

// radixPasses sorts src stably by its 32 key bits lo..lo+31 with three
// 11-bit counting passes, alternating between src and dst (same length),
// and returns the one that holds the result. Bits below lo keep their
// order (the passes are stable).
func radixPasses[T uint32 | uint64](src, dst []T, lo uint) []T {
	const bits, buckets = 11, 1 << 11
	var count [buckets]int
	for shift := lo; shift < lo+32; shift += bits {
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
	return src
}

// groups visits the distinct scores in increasing order (descending when
// down) with the number of positives and negatives that have each.
func (b *BinaryScores) groups(down bool, visit func(p, n int)) {
	P, N := b.pos, b.neg
	if !down {
		i, j := 0, 0
		for i < len(P) || j < len(N) {
			var k uint32
			switch {
			case i == len(P):
				k = N[j]
			case j == len(N):
				k = P[i]
			default:
				k = min(P[i], N[j])
			}
			p, n := 0, 0
			for i < len(P) && P[i] == k {
				i, p = i+1, p+1
			}
			for j < len(N) && N[j] == k {
				j, n = j+1, n+1
			}
			visit(p, n)
		}
		return
	}
	i, j := len(P)-1, len(N)-1
	for i >= 0 || j >= 0 {
		var k uint32
		switch {
		case i < 0:
			k = N[j]
		case j < 0:
			k = P[i]
		default:
			k = max(P[i], N[j])
		}
		p, n := 0, 0
		for i >= 0 && P[i] == k {
			i, p = i-1, p+1
		}
		for j >= 0 && N[j] == k {
			j, n = j-1, n+1
		}
		visit(p, n)
	}
}

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
	i := 0 // samples below the current group
	b.groups(false, func(p, n int) {
		j := i + p + n
		// ranks i+1 .. j share the average (i+1+j)/2
		rankSum += float64(p) * float64(i+1+j) / 2
		i = j
	})
	P, N := float64(len(b.pos)), float64(len(b.neg))
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
	P := float64(len(b.pos))
	b.groups(true, func(p, n int) {
		tp += p
		fp += n
		recall := float64(tp) / P
		precision := float64(tp) / float64(tp+fp)
		ap += (recall - prevRecall) * precision
		prevRecall = recall
	})
	return ap, nil
}
