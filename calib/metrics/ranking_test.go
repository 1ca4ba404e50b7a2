package metrics

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// The radix-sorted pool gives the AUC of the pairwise definition (a positive
// above a negative counts 1, a tie 1/2) and the average precision of a
// threshold sweep over the distinct scores, on scores with many ties, both
// signs, both zeros and extreme magnitudes.
func TestBinaryScoresMatchPairwiseDefinitions(t *testing.T) {
	values := []float32{float32(math.Copysign(0, -1)), 0, -1e30, -2.5, -1e-30, 1e-30, 0.5, 0.75, 3, 1e30,
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32}
	for _, tc := range []struct {
		name string
		n    int
		seed uint64
	}{{"small", 30, 1}, {"ties", 400, 2}, {"many", 3000, 3}} {
		rng := rand.New(rand.NewPCG(tc.seed, 7))
		scores, pos := make([]float32, tc.n), make([]bool, tc.n)
		var b BinaryScores
		for i := range scores {
			scores[i] = values[rng.IntN(len(values))]
			if tc.name == "many" {
				scores[i] = float32(rng.NormFloat64())
			}
			pos[i] = rng.IntN(3) == 0
			if err := b.Add(scores[i], pos[i]); err != nil {
				t.Fatal(err)
			}
		}
		var wins float64
		var P, N int
		for i := range scores {
			if !pos[i] {
				N++
				continue
			}
			P++
			for j := range scores {
				switch {
				case pos[j]:
				case scores[i] > scores[j]:
					wins++
				case scores[i] == scores[j]:
					wins += 0.5
				}
			}
		}
		wantAUC := wins / float64(P*N)
		// AP: thresholds at the distinct scores, high to low.
		distinct := map[float32]bool{}
		for _, s := range scores {
			distinct[s] = true
		}
		var th []float64
		for s := range distinct {
			th = append(th, float64(s))
		}
		sort.Sort(sort.Reverse(sort.Float64Slice(th)))
		var wantAP, prevRecall float64
		for _, t := range th {
			tp, fp := 0, 0
			for i, s := range scores {
				if float64(s) >= t {
					if pos[i] {
						tp++
					} else {
						fp++
					}
				}
			}
			recall := float64(tp) / float64(P)
			wantAP += (recall - prevRecall) * float64(tp) / float64(tp+fp)
			prevRecall = recall
		}
		auc, ap := mustAreas(t, &b)
		if !near(auc, wantAUC, 1e-12) || !near(ap, wantAP, 1e-12) {
			t.Errorf("%s: AUC %v AUPR %v, want %v and %v", tc.name, auc, ap, wantAUC, wantAP)
		}
	}
}

func TestScoreKeyPreservesOrder(t *testing.T) {
	vals := []float32{-math.MaxFloat32, -1e30, -2, -1, -math.SmallestNonzeroFloat32, 0, math.SmallestNonzeroFloat32, 1, 2, 1e30, math.MaxFloat32}
	for i := 1; i < len(vals); i++ {
		if scoreKey(vals[i-1]) >= scoreKey(vals[i]) {
			t.Errorf("key(%v) = %#x >= key(%v) = %#x", vals[i-1], scoreKey(vals[i-1]), vals[i], scoreKey(vals[i]))
		}
	}
	if scoreKey(float32(math.Copysign(0, -1))) != scoreKey(0) {
		t.Error("-0 and +0 have different keys")
	}
}

// BenchmarkAUC2M is the pooled sky AUC of one method and condition at the
// full protocol's size (about 2.4 M sky and ground-truth pixels).
func BenchmarkAUC2M(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const n = 2_400_000
	scores, mask := make([]float32, n), make([]bool, n)
	for i := range scores {
		scores[i], mask[i] = rng.Float32(), true
	}
	var s BinaryScores
	b.ReportAllocs()
	for b.Loop() {
		s.Reset()
		if _, err := s.AddMasked(scores[:n/3], mask[:n/3], true); err != nil {
			b.Fatal(err)
		}
		if _, err := s.AddMasked(scores[n/3:], mask[n/3:], false); err != nil {
			b.Fatal(err)
		}
		if _, err := s.AUC(); err != nil {
			b.Fatal(err)
		}
		if _, err := s.AUPR(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSparsification is one method's two curves (RMSE and AbsRel) on
// one 640x192 frame with the LiDAR density of the simulated world (4.5 %).
func BenchmarkSparsification(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 640 * 192
	gt, pred, unc := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range gt {
		if rng.Float64() < 0.045 {
			gt[i] = 5 + 50*rng.Float32()
		}
		pred[i] = 5 + 50*rng.Float32()
		unc[i] = rng.Float32()
	}
	var s Sparsifier
	b.ReportAllocs()
	for b.Loop() {
		for _, m := range []SparsMetric{SparsRMSE, SparsAbsRel} {
			if _, err := s.Evaluate(pred, gt, unc, m); err != nil {
				b.Fatal(err)
			}
		}
	}
}
