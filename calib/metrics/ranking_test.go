package metrics

import (
	"math"
	"math/rand/v2"
	"slices"
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

// onePoolAreas is the single sorted pool the class-split pool replaced
// (samples sorted by key, class in the lowest bit, groups of equal keys),
// kept as the reference: the split pool must give bit-identical areas, so
// that the protocol's results do not move.
func onePoolAreas(scores []float32, pos []bool) (auc, ap float64) {
	items := make([]uint64, len(scores))
	P := 0
	for i, s := range scores {
		items[i] = uint64(scoreKey(s)) << 1
		if pos[i] {
			items[i] |= 1
			P++
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i] < items[j] })
	n := len(items)
	var rankSum float64
	for i := 0; i < n; {
		j, p := i, 0
		for j < n && items[j]>>1 == items[i]>>1 {
			p += int(items[j] & 1)
			j++
		}
		rankSum += float64(p) * float64(i+1+j) / 2
		i = j
	}
	fP, fN := float64(P), float64(n-P)
	auc = (rankSum - fP*(fP+1)/2) / (fP * fN)
	tp, fp, prev := 0, 0, 0.0
	for j := n - 1; j >= 0; {
		i := j
		for i >= 0 && items[i]>>1 == items[j]>>1 {
			if items[i]&1 == 1 {
				tp++
			} else {
				fp++
			}
			i--
		}
		recall := float64(tp) / fP
		ap += (recall - prev) * float64(tp) / float64(tp+fp)
		prev = recall
		j = i
	}
	return auc, ap
}

// TestSplitPoolsEqualOnePool checks bit-identical areas against the single
// pool, on tie-heavy and continuous scores, with pools that share one sort
// buffer, are reset and refilled, and after Release.
func TestSplitPoolsEqualOnePool(t *testing.T) {
	var shared SortBuffer
	pools := make([]BinaryScores, 3)
	for i := range pools {
		pools[i].UseBuffer(&shared)
	}
	for round := range 2 {
		for pi := range pools {
			rng := rand.New(rand.NewPCG(uint64(round), uint64(pi)))
			n := 500 + 4000*pi
			scores, pos := make([]float32, n), make([]bool, n)
			mask := make([]bool, n)
			for i := range scores {
				if pi == 0 {
					scores[i] = float32(rng.IntN(7)) / 4 // many ties
				} else {
					scores[i] = float32(rng.NormFloat64())
				}
				pos[i] = rng.IntN(4) == 0
				mask[i] = pos[i]
			}
			b := &pools[pi]
			b.Reset()
			if _, err := b.AddMasked(scores, mask, true); err != nil {
				t.Fatal(err)
			}
			for i := range mask {
				mask[i] = !pos[i]
			}
			if _, err := b.AddMasked(scores, mask, false); err != nil {
				t.Fatal(err)
			}
			auc, ap := mustAreas(t, b)
			wantAUC, wantAP := onePoolAreas(scores, pos)
			if auc != wantAUC || ap != wantAP {
				t.Errorf("round %d pool %d: AUC %v AUPR %v, one pool %v %v", round, pi, auc, ap, wantAUC, wantAP)
			}
			if p, n := b.Counts(); p+n != len(scores) {
				t.Errorf("counts %d + %d, want %d", p, n, len(scores))
			}
		}
	}
	if len(pools[0].own.tmp) != 0 || cap(shared.tmp) == 0 {
		t.Error("pools with a shared buffer sorted through their own")
	}
	pools[1].Release()
	if _, err := pools[1].AUC(); err == nil {
		t.Error("released pool still has an area")
	}
}

// refCurve is the sparsification curve as the comparison sort defines it
// (pixels by increasing key, ties by index; the kept prefix at each
// fraction), computed from scratch: the reference for the Sparsifier's
// reused orders and oracle curves.
func refCurve(key, val []float64, fractions []float64, metric SparsMetric) []float64 {
	idx := make([]int, len(key))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return key[idx[a]] < key[idx[b]] })
	prefix := make([]float64, len(idx)+1)
	for i, o := range idx {
		prefix[i+1] = prefix[i] + val[o]
	}
	var out []float64
	n := len(idx)
	for _, f := range fractions {
		keep := n - int(math.Floor(f*float64(n)+1e-9))
		if keep <= 0 {
			out = append(out, 0)
			continue
		}
		m := prefix[keep] / float64(keep)
		if metric == SparsRMSE {
			m = math.Sqrt(math.Max(m, 0))
		}
		out = append(out, m)
	}
	return out
}

// TestSparsifierReuseIsExact runs one Sparsifier through the sequence an
// evaluation makes (several maps of one image, each for both metrics, then
// a new image in the same buffers, maps with ties and ±0) and checks every
// curve against a from-scratch comparison sort, exactly.
func TestSparsifierReuseIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 700
	pred, gt := make([]float32, n), make([]float32, n)
	var s Sparsifier
	for img := 0; img < 2; img++ {
		for i := range gt {
			gt[i] = 0
			if rng.IntN(3) > 0 {
				gt[i] = 1 + 50*rng.Float32()
			}
			pred[i] = 1 + 50*rng.Float32()
		}
		for m := 0; m < 4; m++ {
			unc := make([]float32, n)
			for i := range unc {
				switch m {
				case 0:
					unc[i] = rng.Float32()
				case 1:
					unc[i] = float32(rng.IntN(5)) // ties
				case 2:
					unc[i] = float32(math.Copysign(0, float64(rng.IntN(2)-1))) // ±0 only
				default:
					unc[i] = float32(rng.NormFloat64())
				}
			}
			for _, metric := range []SparsMetric{SparsRMSE, SparsAbsRel, SparsRMSE} {
				r, err := s.Evaluate(pred, gt, unc, metric)
				if err != nil {
					t.Fatal(err)
				}
				var key, val, oval []float64
				for i, y := range gt {
					if !(y > 0) {
						continue
					}
					e := float64(pred[i]) - float64(y)
					v := e * e
					if metric == SparsAbsRel {
						v = math.Abs(e) / float64(y)
					}
					key, val = append(key, float64(unc[i])), append(val, v)
				}
				oval = val
				wantCurve := refCurve(key, val, r.Fractions, metric)
				wantOracle := refCurve(oval, val, r.Fractions, metric)
				if !slices.Equal(r.Curve, wantCurve) || !slices.Equal(r.Oracle, wantOracle) {
					t.Fatalf("image %d map %d %v: curves differ from the comparison sort", img, m, metric)
				}
			}
		}
	}
}
