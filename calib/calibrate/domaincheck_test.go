package calibrate

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckDomain: the refusal rules on hand-made per-frame values: more
// than DomainMaxOutside of the frames above the limit, or a band whose
// median frame exceeds the in-domain p95, refuse with the numbers; at or
// below the bounds the data pass.
func TestCheckDomain(t *testing.T) {
	base := func(dist []float64, ks, bd float64) *DomainSummary {
		d := &DomainSummary{Statistic: "mahalanobis", RecordFrames: 60, Limit: 2, Median: 1,
			KSP95: []float64{0.5, 0.6}, BOverDepthP95: []float64{0.3, 0.2}, Distances: dist}
		for range dist {
			d.KS = append(d.KS, []float64{ks, 0.1})
			d.BOverDepth = append(d.BOverDepth, []float64{0.1, bd})
		}
		return d
	}
	ten := func(above int) []float64 {
		v := make([]float64, 10)
		for i := range v {
			v[i] = 1
			if i < above {
				v[i] = 3
			}
		}
		return v
	}
	for _, c := range []struct {
		name    string
		d       *DomainSummary
		outside int
		want    []string // "" entries: accepted
	}{
		{"in domain", base(ten(1), 0.4, 0.1), 1, nil},
		// 2 of 10 = DomainMaxOutside exactly: not more than it
		{"at the bound", base(ten(2), 0.4, 0.1), 2, nil},
		{"outside", base(ten(3), 0.4, 0.1), 3, []string{"3 of 10 frames (30%)", "distance above 2", "median 1, in the domain 1"}},
		{"moves tau_e", base(ten(0), 0.55, 0.1), 0, []string{"move tau_e", "band 0: median 0.55 > p95 0.5"}},
		{"moves tau_a", base(ten(0), 0.4, 0.25), 0, []string{"move tau_a", "band 1: median 0.25 > p95 0.2"}},
		{"all three", base(ten(10), 0.9, 0.9), 10, []string{"10 of 10", "move tau_e", "move tau_a", "Next step: train the AuxUE"}},
	} {
		v, err := CheckDomain(c.d)
		if v.Outside != c.outside || v.Frames != 10 {
			t.Errorf("%s: %d of %d outside, want %d of 10", c.name, v.Outside, v.Frames, c.outside)
		}
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrOutsideDomain) {
			t.Errorf("%s: err %v, want ErrOutsideDomain", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", c.name, err, w)
			}
		}
	}
}

// TestMergeDomainConcatenatesShards: per-frame values of two shards add
// up in order; a shard measured against another record is refused.
func TestMergeDomainConcatenatesShards(t *testing.T) {
	mk := func(limit float64, dist ...float64) Named {
		d := &DomainSummary{Statistic: "knn", Limit: limit, KSP95: []float64{1}, BOverDepthP95: []float64{1}, Distances: dist}
		for range dist {
			d.KS, d.BOverDepth = append(d.KS, []float64{0}), append(d.BOverDepth, []float64{0})
		}
		return Named{Name: "s", Summary: &Summary{Domain: d}}
	}
	m, err := mergeDomain([]Named{mk(2, 1, 2), {Name: "empty", Summary: &Summary{}}, mk(2, 3)})
	if err != nil || len(m.Distances) != 3 || m.Distances[2] != 3 || len(m.KS) != 3 {
		t.Fatalf("merged %+v, %v", m, err)
	}
	if _, err := mergeDomain([]Named{mk(2, 1), mk(2.5, 1)}); err == nil || !strings.Contains(err.Error(), "another domain record") {
		t.Fatalf("different records merged: %v", err)
	}
}
