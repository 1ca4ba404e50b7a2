package auxue

import (
	"fmt"
	"math"
	"slices"
)

// RankAUC returns the area under the ROC curve of scores separating the
// positive class (higher score = more positive), from the Mann-Whitney U
// statistic with average ranks for ties: AUC = (R+ - P(P+1)/2) / (P N), where
// R+ is the rank sum of the P positives among P + N scores.
func RankAUC(scores []float64, positive []bool) (float64, error) {
	if len(scores) != len(positive) {
		return 0, fmt.Errorf("auc: %d scores, %d labels", len(scores), len(positive))
	}
	order := make([]int, len(scores))
	var np, nn int
	for i, s := range scores {
		if math.IsNaN(s) {
			return 0, fmt.Errorf("auc: score %d is NaN", i)
		}
		order[i] = i
		if positive[i] {
			np++
		} else {
			nn++
		}
	}
	if np == 0 || nn == 0 {
		return 0, fmt.Errorf("auc: need both classes, got %d positives and %d negatives", np, nn)
	}
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case scores[a] < scores[b]:
			return -1
		case scores[a] > scores[b]:
			return 1
		}
		return 0
	})
	var rankSum float64
	for i := 0; i < len(order); {
		j := i + 1
		for j < len(order) && scores[order[j]] == scores[order[i]] {
			j++
		}
		avg := float64(i+1+j) / 2 // mean of ranks i+1 .. j
		for _, k := range order[i:j] {
			if positive[k] {
				rankSum += avg
			}
		}
		i = j
	}
	p, n := float64(np), float64(nn)
	return (rankSum - p*(p+1)/2) / (p * n), nil
}
