package auxue

import (
	"math"
	"testing"
)

func TestRankAUC(t *testing.T) {
	tests := []struct {
		name   string
		scores []float64
		pos    []bool
		want   float64
	}{
		{"perfect", []float64{0.1, 0.2, 0.8, 0.9}, []bool{false, false, true, true}, 1},
		{"inverted", []float64{0.9, 0.8, 0.1, 0.2}, []bool{false, false, true, true}, 0},
		{"all tied", []float64{1, 1, 1, 1, 1}, []bool{true, false, true, false, false}, 0.5},
		// Pairs (pos, neg): (3,1) win, (3,2) win, (3,3) tie, (1,1) tie, (1,2) loss, (1,3) loss: (1+1+.5+.5)/6.
		{"ties count half", []float64{3, 1, 1, 2, 3}, []bool{true, true, false, false, false}, 3.0 / 6},
		// (2,1) win, (2,0) win, (1,1) tie, (1,0) win: 3.5/4; ordinal ranks would give 0.75 or 1.
		{"tie between classes", []float64{1, 2, 0, 1}, []bool{false, true, false, true}, 0.875},
		// One positive above 2 of 3 negatives.
		{"2 of 3", []float64{0.5, 0.1, 0.4, 0.9}, []bool{true, false, false, false}, 2.0 / 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RankAUC(tt.scores, tt.pos)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("AUC = %v, want %v", got, tt.want)
			}
		})
	}
	for _, bad := range []struct {
		scores []float64
		pos    []bool
	}{
		{[]float64{1, 2}, []bool{true, true}},
		{[]float64{1}, []bool{true, false}},
		{[]float64{math.NaN(), 1}, []bool{true, false}},
		{nil, nil},
	} {
		if _, err := RankAUC(bad.scores, bad.pos); err == nil {
			t.Errorf("RankAUC(%v, %v) accepted", bad.scores, bad.pos)
		}
	}
}
