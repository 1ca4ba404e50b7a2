package metrics

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// TestScoreHistClosedForm: positives {2, 3}, negatives {1, 2.0001}; 2 and
// 2.0001 share a bin (2^-9 wide at 2). Of the 4 pairs the scores order 3
// correctly and one wrongly (AUC 3/4); the histogram counts the shared-bin
// pair one half (3.5/4), and the tie bound is exactly that half pair (1/8).
// AP: the scores give 1/2 (at 3) + 1/2 * 2/3 (at 2); the histogram takes
// 2 and 2.0001 at once: 1/2 + 1/2 * 2/3 too.
func TestScoreHistClosedForm(t *testing.T) {
	var h ScoreHist
	var b BinaryScores
	for _, s := range []float32{2, 3} {
		h.Add(s, true)
		b.Add(s, true)
	}
	for _, s := range []float32{1, 2.0001} {
		h.Add(s, false)
		b.Add(s, false)
	}
	exact, _ := b.AUC()
	if exact != 0.75 || h.AUC() != 0.875 || h.AUCTieBound() != 0.125 {
		t.Fatalf("AUC exact %g (want 0.75), histogram %g (0.875), bound %g (0.125)", exact, h.AUC(), h.AUCTieBound())
	}
	if got, want := h.AUPR(), 0.5+0.5*2.0/3; math.Abs(got-want) > 1e-12 {
		t.Fatalf("AUPR %g, want %g", got, want)
	}
	if h.Add(float32(math.NaN()), true) {
		t.Fatal("NaN counted")
	}
}

// TestScoreHistShardsWithinBound: K/S-like scores of two overlapping
// classes, split over three shards and merged through JSON: the merged AUC
// equals the whole histogram's and lies within AUCTieBound of the exact
// AUC; the AP is within 1e-3 of the exact one on 2e5 samples.
func TestScoreHistShardsWithinBound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	var whole ScoreHist
	parts := make([]ScoreHist, 3)
	var b BinaryScores
	for i := range 200000 {
		pos := i%4 == 0
		s := float32(32 / (32 + 10*r.ExpFloat64()))
		if pos {
			s = float32(32 / (32 + 5*r.ExpFloat64()))
		}
		whole.Add(s, pos)
		parts[r.IntN(3)].Add(s, pos)
		b.Add(s, pos)
	}
	var merged ScoreHist
	for _, p := range parts {
		j, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var back ScoreHist
		if err := json.Unmarshal(j, &back); err != nil {
			t.Fatal(err)
		}
		merged.Merge(&back)
	}
	exact, _ := b.AUC()
	if merged.AUC() != whole.AUC() {
		t.Fatalf("merged AUC %g, whole %g", merged.AUC(), whole.AUC())
	}
	if d := math.Abs(merged.AUC() - exact); d > merged.AUCTieBound() {
		t.Fatalf("AUC %g vs exact %g: %g > bound %g", merged.AUC(), exact, d, merged.AUCTieBound())
	}
	t.Logf("AUC %g exact %g, tie bound %.2g", merged.AUC(), exact, merged.AUCTieBound())
	ap, _ := b.AUPR()
	if math.Abs(merged.AUPR()-ap) > 1e-3 {
		t.Fatalf("AP %g vs exact %g", merged.AUPR(), ap)
	}
}
