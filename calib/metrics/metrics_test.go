package metrics

import (
	"math"
	"math/rand/v2"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestDepthHandComputed(t *testing.T) {
	// Three valid pixels (the 0 is no ground truth): y = 2, 4, 10; d = 2.5, 4, 8.
	pred := []float32{2.5, 4, 99, 8}
	gt := []float32{2, 4, 0, 10}
	q, err := Depth(pred, gt, DepthRange{Min: 1e-3, Max: 80})
	if err != nil {
		t.Fatal(err)
	}
	want := DepthQuality{
		AbsRel:  (0.5/2 + 0 + 2.0/10) / 3,
		SqRel:   (0.25/2 + 0 + 4.0/10) / 3,
		RMSE:    math.Sqrt((0.25 + 0 + 4) / 3),
		RMSELog: math.Sqrt((math.Pow(math.Log(1.25), 2) + math.Pow(math.Log(0.8), 2)) / 3),
		Log10:   (math.Abs(math.Log10(1.25)) + math.Abs(math.Log10(0.8))) / 3,
		Delta1:  1.0 / 3, // ratios 1.25 (not < 1.25), 1, 1.25
		Delta2:  1, Delta3: 1, N: 3,
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"absrel", q.AbsRel, want.AbsRel}, {"sqrel", q.SqRel, want.SqRel}, {"rmse", q.RMSE, want.RMSE},
		{"rmselog", q.RMSELog, want.RMSELog}, {"log10", q.Log10, want.Log10},
		{"d1", q.Delta1, want.Delta1}, {"d2", q.Delta2, want.Delta2}, {"d3", q.Delta3, want.Delta3}} {
		if !near(c.got, c.want, 1e-6) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if q.N != 3 {
		t.Errorf("N = %d, want 3", q.N)
	}
	// Range: y = 90 is outside (0, 80]; a prediction above 80 is clamped.
	q, _ = Depth([]float32{100, 5}, []float32{90, 40}, KITTIRange)
	if q.N != 1 || !near(q.AbsRel, 35.0/40, 1e-6) {
		t.Errorf("range: N %d absrel %v, want 1 and %v", q.N, q.AbsRel, 35.0/40)
	}
	q, _ = Depth([]float32{1}, []float32{0}, KITTIRange)
	if q.N != 0 || !math.IsNaN(q.AbsRel) {
		t.Errorf("no valid pixel: %+v", q)
	}
	if _, err := Depth([]float32{1}, []float32{1, 2}, KITTIRange); err == nil {
		t.Error("length mismatch accepted")
	}
	var m DepthMean
	m.Add(DepthQuality{AbsRel: 0.1, N: 5})
	m.Add(DepthQuality{AbsRel: 0.3, N: 1})
	m.Add(DepthQuality{})
	if got := m.Mean(); !near(got.AbsRel, 0.2, 1e-12) || got.N != 6 || m.Images != 2 {
		t.Errorf("per-image mean %+v", got)
	}
}

func TestSparsificationHandComputed(t *testing.T) {
	// Four pixels, errors e = 1, 2, 3, 4 (gt 10, pred 10+e); step 0.25.
	gt := []float32{10, 10, 10, 10}
	pred := []float32{11, 12, 13, 14}
	s := Sparsifier{Step: 0.25}
	// Oracle-ordered uncertainty: the curve equals the oracle, AUSE = 0.
	r, err := s.Evaluate(pred, gt, []float32{0.1, 0.2, 0.3, 0.4}, SparsRMSE)
	if err != nil {
		t.Fatal(err)
	}
	// kept sets: {1,2,3,4}, {1,2,3}, {1,2}, {1}, {} at x = 0, .25, .5, .75, 1
	curve := []float64{math.Sqrt(30.0 / 4), math.Sqrt(14.0 / 3), math.Sqrt(5.0 / 2), 1, 0}
	for i, v := range curve {
		if !near(r.Curve[i], v, 1e-12) || !near(r.Oracle[i], v, 1e-12) {
			t.Fatalf("point %d: curve %v oracle %v, want %v", i, r.Curve[i], r.Oracle[i], v)
		}
	}
	area := 0.25 * (curve[0]/2 + curve[1] + curve[2] + curve[3] + curve[4]/2)
	if !near(r.AreaCurve, area, 1e-12) || !near(r.AUSE, 0, 1e-12) || !near(r.AURG, curve[0]-area, 1e-12) || !near(r.Full, curve[0], 1e-12) {
		t.Errorf("oracle ranking: %+v, want area %v AUSE 0 AURG %v", r, area, curve[0]-area)
	}
	// Reversed ranking removes the smallest errors first: kept {2,3,4}, {3,4}, {4}.
	r, _ = s.Evaluate(pred, gt, []float32{0.4, 0.3, 0.2, 0.1}, SparsRMSE)
	worst := []float64{math.Sqrt(30.0 / 4), math.Sqrt(29.0 / 3), math.Sqrt(25.0 / 2), 4, 0}
	wArea := 0.25 * (worst[0]/2 + worst[1] + worst[2] + worst[3] + worst[4]/2)
	if !near(r.AUSE, wArea-area, 1e-12) || !near(r.AURG, worst[0]-wArea, 1e-12) || r.AURG >= 0 {
		t.Errorf("reversed ranking: AUSE %v AURG %v, want %v and %v (< 0)", r.AUSE, r.AURG, wArea-area, worst[0]-wArea)
	}
	// Tied uncertainties keep pixel order: the last pixels go first, here
	// the smallest errors (4, 3, 2, 1), as in the reversed ranking.
	r, _ = s.Evaluate([]float32{14, 13, 12, 11}, gt, []float32{0.5, 0.5, 0.5, 0.5}, SparsRMSE)
	for i, v := range worst {
		if !near(r.Curve[i], v, 1e-12) {
			t.Fatalf("tied ranking point %d: %v, want %v", i, r.Curve[i], v)
		}
	}
	// AbsRel on gt 1, 2, 4 with |e| = 1 each: relative errors 1, .5, .25.
	r, _ = s.Evaluate([]float32{2, 3, 5}, []float32{1, 2, 4}, []float32{3, 2, 1}, SparsAbsRel)
	// n = 3, step .25: removed floor(.25*3)=0, floor(.5*3)=1, floor(.75*3)=2, then all.
	abs := []float64{1.75 / 3, 1.75 / 3, 0.75 / 2, 0.25, 0}
	for i, v := range abs {
		if !near(r.Curve[i], v, 1e-12) {
			t.Fatalf("absrel point %d: %v, want %v", i, r.Curve[i], v)
		}
	}
	if !near(r.AUSE, 0, 1e-12) {
		t.Errorf("absrel oracle ranking AUSE %v", r.AUSE)
	}
}

func TestSparsificationDefaultsAndRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	n := 20000
	gt, pred, unc := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range gt {
		gt[i] = 5 + 50*rng.Float32()
		pred[i] = gt[i] + float32(rng.NormFloat64())*gt[i]*0.1
		unc[i] = rng.Float32()
	}
	var s Sparsifier
	r, err := s.Evaluate(pred, gt, unc, SparsAbsRel)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Fractions) != 21 || r.Fractions[20] != 1 || !near(r.Fractions[19], 0.95, 1e-12) {
		t.Fatalf("default fractions %v", r.Fractions)
	}
	// A random ranking keeps the mean on every kept subset in expectation:
	// the curve is flat at Full up to x = .95, then drops to 0 at x = 1, so
	// area = .95 Full + .05 Full/2 and AURG = Full * .025 (up to noise).
	if !near(r.AURG, 0.025*r.Full, 0.01*r.Full) {
		t.Errorf("random ranking AURG %v, want about %v", r.AURG, 0.025*r.Full)
	}
	if r.AUSE <= 0 {
		t.Errorf("random ranking AUSE %v, want > 0", r.AUSE)
	}
	allocs := testing.AllocsPerRun(5, func() { _, _ = s.Evaluate(pred, gt, unc, SparsRMSE) })
	if allocs != 0 {
		t.Errorf("warm Evaluate allocates %v times", allocs)
	}
	for _, step := range []float64{-0.1, 1, 2} {
		if _, err := (&Sparsifier{Step: step}).Evaluate(pred, gt, unc, SparsRMSE); err == nil {
			t.Errorf("step %v accepted", step)
		}
	}
	r, _ = s.Evaluate([]float32{1}, []float32{0}, []float32{1}, SparsRMSE)
	if r.N != 0 || !math.IsNaN(r.AUSE) {
		t.Errorf("no valid pixel: %+v", r)
	}
	var m SparsMean
	m.Add(Sparsification{N: 1, AUSE: 1, AURG: 2, Full: 3})
	m.Add(Sparsification{N: 1, AUSE: 3, AURG: 0, Full: 1})
	if a, g, f := m.Mean(); a != 2 || g != 1 || f != 2 {
		t.Errorf("mean %v %v %v", a, g, f)
	}
}

// mustAreas returns the AUC and AUPR of b, failing the test on an error.
func mustAreas(t *testing.T, b *BinaryScores) (auc, aupr float64) {
	t.Helper()
	auc, err := b.AUC()
	if err != nil {
		t.Fatal(err)
	}
	if aupr, err = b.AUPR(); err != nil {
		t.Fatal(err)
	}
	return auc, aupr
}

func TestAUCAndAUPR(t *testing.T) {
	add := func(b *BinaryScores, s []float32, pos []bool) {
		b.Reset()
		for i := range s {
			if err := b.Add(s[i], pos[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name      string
		scores    []float32
		pos       []bool
		auc, aupr float64
	}{
		{"perfect", []float32{0.9, 0.8, 0.3, 0.1}, []bool{true, true, false, false}, 1, 1},
		{"inverted", []float32{0.1, 0.2, 0.8, 0.9}, []bool{true, true, false, false}, 0,
			(0.5*1.0/3 + 0.5*2.0/4)}, // positives found at ranks 3 and 4
		// One swap: order (desc) P N P N: AUC = 3/4; AP = .5*1 + .5*(2/3).
		{"one swap", []float32{4, 3, 2, 1}, []bool{true, false, true, false}, 0.75, 0.5 + 0.5*2.0/3},
		// All tied: AUC 1/2, AP = precision at the single threshold = P/(P+N).
		{"all tied", []float32{1, 1, 1, 1, 1}, []bool{true, false, false, true, false}, 0.5, 0.4},
		// A tie between a positive and a negative counts one half.
		{"half tie", []float32{2, 1, 1}, []bool{true, true, false}, 0.75, 0.5*1 + 0.5*2.0/3},
	}
	var b BinaryScores
	for _, tc := range tests {
		add(&b, tc.scores, tc.pos)
		auc, ap := mustAreas(t, &b)
		if !near(auc, tc.auc, 1e-12) || !near(ap, tc.aupr, 1e-12) {
			t.Errorf("%s: AUC %v AUPR %v, want %v and %v", tc.name, auc, ap, tc.auc, tc.aupr)
		}
	}
	// Random scores: AUC about 1/2, AUPR about the positive rate.
	rng := rand.New(rand.NewPCG(2, 2))
	b.Reset()
	for i := 0; i < 40000; i++ {
		_ = b.Add(rng.Float32(), i%4 == 0)
	}
	auc, _ := b.AUC()
	ap, _ := b.AUPR()
	if !near(auc, 0.5, 0.01) || !near(ap, 0.25, 0.01) {
		t.Errorf("random: AUC %v AUPR %v, want about 0.5 and 0.25", auc, ap)
	}
	b.Reset()
	_ = b.Add(1, true)
	if _, err := b.AUC(); err == nil {
		t.Error("one class accepted")
	}
	if err := b.Add(float32(math.NaN()), true); err == nil {
		t.Error("NaN score accepted")
	}
	b.Reset()
	skipped, err := b.AddMasked([]float32{1, float32(math.Inf(1)), 3}, []bool{true, true, false}, true)
	if err != nil || skipped != 1 {
		t.Errorf("AddMasked skipped %d, err %v", skipped, err)
	}
	if p, n := b.Counts(); p != 1 || n != 0 {
		t.Errorf("counts %d %d", p, n)
	}
}

func TestSkyAll(t *testing.T) {
	labels := []uint8{SkyClass, SkyClass, 7, 7}
	tests := []struct {
		name string
		unc  []float32
		want float64
		ok   bool
	}{
		{"sky is max", []float32{5, 5, 1, 3}, 0, true},
		{"sky is min", []float32{1, 1, 2, 5}, 1, true},
		// normalized sky values 1 and .5: mean((0)^2, (.5)^2) = .125
		{"mixed", []float32{3, 2, 1, 1}, 0.125, true},
		{"constant", []float32{2, 2, 2, 2}, 1, true},
	}
	for _, tc := range tests {
		got, ok, err := SkyAll(tc.unc, labels, SkyClass)
		if err != nil || ok != tc.ok || !near(got, tc.want, 1e-12) {
			t.Errorf("%s: %v %v %v, want %v", tc.name, got, ok, err, tc.want)
		}
	}
	if _, ok, _ := SkyAll([]float32{1, 2}, []uint8{7, 8}, SkyClass); ok {
		t.Error("no sky reported ok")
	}
	if _, _, err := SkyAll([]float32{1}, []uint8{7, 8}, SkyClass); err == nil {
		t.Error("length mismatch accepted")
	}
}

func TestUCE(t *testing.T) {
	var c UCE
	// Perfect calibration in every bin: err equals u.
	u := []float32{0.1, 0.5, 1.0, 2.0}
	got, err := c.Evaluate(u, u, nil)
	if err != nil || !near(got, 0, 1e-12) {
		t.Errorf("calibrated: %v %v", got, err)
	}
	// Two bins over [0, 2]: bin 0 holds u = 0, err 1; bin 1 holds u = 2, err 1 and 3.
	c.Bins = 2
	got, _ = c.Evaluate([]float32{1, 1, 3}, []float32{0, 2, 2}, nil)
	want := 1.0/3*1 + 2.0/3*0
	if !near(got, want, 1e-12) {
		t.Errorf("two bins: %v, want %v", got, want)
	}
	// The mask drops the third pixel: bins hold (1 vs 0) and (1 vs 2).
	got, _ = c.Evaluate([]float32{1, 1, 3}, []float32{0, 2, 2}, []bool{true, true, false})
	if !near(got, 1, 1e-12) {
		t.Errorf("masked: %v, want 1", got)
	}
	got, _ = c.Evaluate([]float32{1}, []float32{1}, []bool{false})
	if !math.IsNaN(got) {
		t.Errorf("empty: %v", got)
	}
	if _, err := c.Evaluate([]float32{1}, []float32{1, 2}, nil); err == nil {
		t.Error("length mismatch accepted")
	}
}
