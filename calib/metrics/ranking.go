package metrics

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// BinaryScores pools scored samples of two classes (pixels or images) for
// AUC and AUPR, with the out-of-distribution class as the positive class and
// the uncertainty as the score (higher = more likely OOD). Reset it to reuse
// its buffer. Not safe for concurrent use.
type BinaryScores struct {
	items  []scored
	pos    int
	sorted bool
}

type scored struct {
	s   float32
	pos bool
}

// Add records one sample; non-finite scores are an error (they have no rank).
func (b *BinaryScores) Add(score float32, positive bool) error {
	if math.IsNaN(float64(score)) || math.IsInf(float64(score), 0) {
		return fmt.Errorf("binary scores: score %v is not finite", score)
	}
	b.items = append(b.items, scored{score, positive})
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
	for i, s := range scores {
		if !mask[i] {
			continue
		}
		if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
			skipped++
			continue
		}
		b.items = append(b.items, scored{s, positive})
		if positive {
			b.pos++
		}
	}
	b.sorted = false
	return skipped, nil
}

// Reset empties the pool, keeping its buffer.
func (b *BinaryScores) Reset() { b.items, b.pos, b.sorted = b.items[:0], 0, false }

// Counts returns the number of positive and negative samples.
func (b *BinaryScores) Counts() (pos, neg int) { return b.pos, len(b.items) - b.pos }

func (b *BinaryScores) sort() error {
	if b.pos == 0 || b.pos == len(b.items) {
		return fmt.Errorf("binary scores: need both classes, have %d positive and %d negative", b.pos, len(b.items)-b.pos)
	}
	if !b.sorted {
		slices.SortFunc(b.items, func(x, y scored) int { return cmp.Compare(x.s, y.s) })
		b.sorted = true
	}
	return nil
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
	n := len(b.items)
	for i := 0; i < n; {
		j := i
		p := 0
		for j < n && b.items[j].s == b.items[i].s {
			if b.items[j].pos {
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
		for i >= 0 && b.items[i].s == b.items[j].s {
			if b.items[i].pos {
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
