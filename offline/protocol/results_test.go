package protocol

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/offline/depthnet"
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
	// Equal values (a frozen model seen by every seed) give exactly that
	// value and no spread, although (0.1+0.1+0.1)/3 != 0.1.
	if m, s, n := meanStd([]float64{0.1, math.NaN(), 0.1, 0.1}); m != 0.1 || s != 0 || n != 3 {
		t.Errorf("meanStd of equal values = %v %v %d, want 0.1 0 3", m, s, n)
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
	auxFeatures(img, depth, h, w, 2, false, feats)
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
	blockErrors(depth, gt, h, w, 2, errs, valid)
	if !valid[0] || valid[1] || errs[0] != (2+2)/2. || errs[1] != 0 {
		t.Fatalf("targets %v %v, want [2 0] [true false]", errs, valid)
	}
}

// The row channel of rgbd+row is the f x f block mean of the main model's
// full-resolution coordinate channel: -0.5 and 0.5 for the two block rows of
// a 4-row frame at f = 2 (full-resolution rows -0.75, -0.25, 0.25, 0.75) and
// of an 8-row frame at f = 4 (-7/8 .. -1/8 and 1/8 .. 7/8).
func TestBlockRowCoordinate(t *testing.T) {
	for _, f := range []int{2, 4} {
		h, w := 2*f, 2*f
		img, depth := make([]float32, 3*h*w), make([]float32, h*w)
		feats := make([]float32, 5*2*2)
		auxFeatures(img, depth, h, w, f, true, feats)
		want := []float32{-0.5, -0.5, 0.5, 0.5}
		for i, c := range feats[4*4:] {
			var full float64
			for r := f * (i / 2); r < f*(i/2+1); r++ {
				full += float64(depthnet.RowCoordinate(r, h)) / float64(f)
			}
			if c != want[i] || math.Abs(float64(c)-full) > 1e-7 {
				t.Fatalf("f %d: row channel %d = %v, want %v (block mean %v)", f, i, c, want[i], full)
			}
		}
	}
}

func TestParseAuxInputs(t *testing.T) {
	for _, tc := range []struct {
		in       string
		content  int
		decoder  bool
		wantFail bool
	}{
		{"rgbd", 4, false, false},
		{"rgbd+row", 5, false, false},
		{"rgbd+decoder", 4, true, false},
		{"rgbd+row+decoder", 5, true, false},
		{"rgb", 0, false, true},
		{"rgbd+decoder+row", 0, false, true},
	} {
		got, err := parseAuxInputs(tc.in)
		if (err != nil) != tc.wantFail {
			t.Fatalf("%q: error %v, want failure %v", tc.in, err, tc.wantFail)
		}
		if err == nil && (got.content() != tc.content || got.decoder != tc.decoder) {
			t.Fatalf("%q: %+v content %d, want %d decoder %v", tc.in, got, got.content(), tc.content, tc.decoder)
		}
	}
}
