package eval

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/didoedge/didoedge/calib/metrics"
)

func TestMeanStd(t *testing.T) {
	cases := []struct {
		in        []float64
		mean, std float64
		n         int
	}{
		{[]float64{1, 2, 3}, 2, 1, 3}, // sample std: sqrt(((1)+(0)+(1))/2)
		{[]float64{4}, 4, 0, 1},       // one seed: no spread
		{[]float64{math.NaN(), 2, 4}, 3, math.Sqrt2, 2},
	}
	for _, tc := range cases {
		m, s, n := meanStd(tc.in)
		if n != tc.n || math.Abs(m-tc.mean) > 1e-12 || math.Abs(s-tc.std) > 1e-12 {
			t.Errorf("meanStd(%v) = %v %v %d, want %v %v %d", tc.in, m, s, n, tc.mean, tc.std, tc.n)
		}
	}
}

func TestCorruptionMeansAndSchema(t *testing.T) {
	tab := newTable(2)
	for si, v := range [][2]float64{{0.5, 0.7}, {0.9, 0.1}} {
		tab.set(rowKey{"dido_sep", ExpSky, "fog", 1, "auc"}, si, v[0])
		tab.set(rowKey{"dido_sep", ExpSky, "gaussian_noise", 1, "auc"}, si, v[1])
	}
	tab.set(rowKey{"dido_sep", ExpSky, CorrClean, 0, "auc"}, 0, 0.8)
	tab.set(rowKey{"dido_sep", ExpSky, CorrClean, 0, "auc"}, 1, 0.6)
	tab.addCorruptionMeans()
	rows, dropped := tab.rows()
	if len(dropped) != 0 {
		t.Fatalf("dropped %v", dropped)
	}
	r := &Results{Runs: rows}
	got, ok := r.Lookup("dido_sep", ExpSky, CorrMean, 1, "auc")
	// per seed: (0.5+0.7)/2 = 0.6 and (0.9+0.1)/2 = 0.5; mean 0.55, std |0.1|/sqrt(2)
	if !ok || math.Abs(got.Mean-0.55) > 1e-12 || math.Abs(got.Std-0.1/math.Sqrt2) > 1e-12 || got.Seeds != 2 {
		t.Fatalf("corruption mean row %+v (found %v)", got, ok)
	}
	p := filepath.Join(t.TempDir(), "results.json")
	if err := r.WriteJSON(p); err != nil {
		t.Fatal(err)
	}
	back, err := ReadResults(p)
	if err != nil || len(back.Runs) != len(r.Runs) {
		t.Fatalf("read back: %v", err)
	}
	bad := &Results{Runs: []Row{{Method: "m", Experiment: ExpSky, Corruption: CorrClean, Metric: "auroc", Seeds: 1}}}
	if err := bad.WriteJSON(p); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadResults(p); err == nil {
		t.Fatal("an unknown metric name was accepted")
	}
}

// The ROC curve's trapezoid area must equal calib/metrics' AUC (an
// independent implementation), including ties.
func TestRocPRMatchesMetricsAUC(t *testing.T) {
	scores := []float32{0.9, 0.8, 0.7, 0.7, 0.3, 0.1, 0.1, 0.05}
	labels := []bool{true, false, true, false, true, false, true, false}
	roc, pr := rocPR(scores, labels, 1000)
	var area float64
	for i := 1; i < len(roc); i++ {
		area += (roc[i].X - roc[i-1].X) * (roc[i].Y + roc[i-1].Y) / 2
	}
	var b metrics.BinaryScores
	for i, s := range scores {
		if err := b.Add(s, labels[i]); err != nil {
			t.Fatal(err)
		}
	}
	want, err := b.AUC()
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(area-want) > 1e-12 {
		t.Fatalf("ROC area %v, metrics.AUC %v", area, want)
	}
	if last := roc[len(roc)-1]; last.X != 1 || last.Y != 1 {
		t.Fatalf("ROC ends at %v", last)
	}
	if first := pr[0]; first.X != 0.25 || first.Y != 1 {
		t.Fatalf("first PR point %v, want recall 0.25 precision 1", first)
	}
}

// A 2x4 frame (one row of two 2x2 blocks): the features are block means
// (depth over maxDepth) and the targets the mean |d - y| over GT pixels.
func TestHalfResolutionFeatures(t *testing.T) {
	const h, w = 2, 4
	img := make([]float32, 3*h*w)
	for i := range img {
		img[i] = float32(i)
	}
	depth := []float32{8, 16, 24, 32, 40, 48, 56, 64}
	gt := []float32{10, 0, 0, 0, 0, 50, 0, 0}
	feats := make([]float32, 4*2)
	auxFeatures(img, depth, h, w, feats)
	want := []float32{
		(0 + 1 + 4 + 5) / 4., (2 + 3 + 6 + 7) / 4., // R: pixels 0,1,4,5 and 2,3,6,7
		(8 + 9 + 12 + 13) / 4., (10 + 11 + 14 + 15) / 4.,
		(16 + 17 + 20 + 21) / 4., (18 + 19 + 22 + 23) / 4.,
		(8 + 16 + 40 + 48) / 4. / maxDepth, (24 + 32 + 56 + 64) / 4. / maxDepth,
	}
	for i := range want {
		if math.Abs(float64(feats[i]-want[i])) > 1e-6 {
			t.Fatalf("feature %d = %v, want %v", i, feats[i], want[i])
		}
	}
	errs, valid := make([]float32, 2), make([]bool, 2)
	halfResErrors(depth, gt, h, w, errs, valid)
	if !valid[0] || valid[1] || errs[0] != (2+2)/2. || errs[1] != 0 {
		t.Fatalf("targets %v %v, want [2 0] [true false]", errs, valid)
	}
}
