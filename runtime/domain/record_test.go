package domain

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// gaussianFrames draws n vectors x = mu + A g, g standard normal, so that
// x has mean mu and covariance A A'.
func gaussianFrames(rng *rand.Rand, n int, mu []float64, a *mat.Dense) [][]float64 {
	d := len(mu)
	out := make([][]float64, n)
	g := make([]float64, d)
	for i := range out {
		for j := range g {
			g[j] = rng.NormFloat64()
		}
		x := make([]float64, d)
		for r := range d {
			s := mu[r]
			for c := range d {
				s += a.At(r, c) * g[c]
			}
			x[r] = s
		}
		out[i] = x
	}
	return out
}

// randomMixing is A = diag(s) (I + 0.3 G / sqrt(d)), G standard normal:
// correlated statistics whose correlation has eigenvalues within about
// [0.16, 2.6] (Ledoit-Wolf's shrinkage toward the identity then biases
// D^2 by less than lambda / 0.16), in units that differ by up to 10^4 per
// row (s = 10^U(-2,2)), as the real statistics' do.
func randomMixing(rng *rand.Rand, d int) *mat.Dense {
	a := mat.NewDense(d, d, nil)
	for r := range d {
		scale := math.Pow(10, rng.Float64()*4-2)
		for c := range d {
			v := 0.3 * rng.NormFloat64() / math.Sqrt(float64(d))
			if c == r {
				v++
			}
			a.Set(r, c, scale*v)
		}
	}
	return a
}

// TestMahalanobisChiSquareMean: for Gaussian statistics the squared
// Mahalanobis distance with the true mean and covariance is chi-square
// with d degrees of freedom, mean d and variance 2d. With a record fitted
// on 20,000 frames (shrinkage ~ 0) the mean of d D^2 over 4,000 fresh
// frames must be d within 4 standard errors sqrt(2d/4000) plus the
// estimation bias ~ d (d+1)/n, and each D must match the true-parameter
// distance closely.
func TestMahalanobisChiSquareMean(t *testing.T) {
	l := Layout{ImageBands: 2, MapBands: 4}
	d := l.Dim()
	rng := rand.New(rand.NewPCG(1, 2))
	mu := make([]float64, d)
	for i := range mu {
		mu[i] = rng.NormFloat64() * 3
	}
	a := randomMixing(rng, d)
	train := gaussianFrames(rng, 20000, mu, a)
	rec, err := Fit(l, train, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Shrinkage > 0.01 {
		t.Errorf("shrinkage %v with 20000 frames of %d dimensions, want < 0.01", rec.Shrinkage, d)
	}
	var cov mat.Dense
	cov.Mul(a, a.T())
	var prec mat.Dense
	if err := prec.Inverse(&cov); err != nil {
		t.Fatal(err)
	}
	test := gaussianFrames(rng, 4000, mu, a)
	s := rec.NewScratch()
	var sum, sumTrue float64
	diff := make([]float64, d)
	for _, x := range test {
		dist, err := rec.Distance(x, s)
		if err != nil {
			t.Fatal(err)
		}
		for i := range x {
			diff[i] = x[i] - mu[i]
		}
		m2 := mat.Inner(mat.NewVecDense(d, diff), &prec, mat.NewVecDense(d, diff))
		sum += float64(d) * dist * dist
		sumTrue += m2
		if rel := math.Abs(float64(d)*dist*dist-m2) / m2; rel > 0.1 && m2 > 1 {
			t.Fatalf("d D^2 = %v, true Mahalanobis^2 %v", float64(d)*dist*dist, m2)
		}
	}
	mean, meanTrue := sum/4000, sumTrue/4000
	tol := 4*math.Sqrt(2*float64(d)/4000) + float64(d)*float64(d+1)/20000
	if math.Abs(mean-float64(d)) > tol {
		t.Errorf("mean d D^2 = %.3f, want chi-square mean %d +- %.3f (true parameters: %.3f)", mean, d, tol, meanTrue)
	}
	// The cross-validated in-domain distances: their median is the
	// chi-square median, d (1 - 2/(9d))^3 (Wilson-Hilferty), as D^2 d.
	med := rec.Distances[len(rec.Distances)/2]
	wh := float64(d) * math.Pow(1-2/(9*float64(d)), 3)
	if got := med * med * float64(d); math.Abs(got-wh) > 0.05*wh {
		t.Errorf("median cross-validated d D^2 = %.3f, chi-square median %.3f", got, wh)
	}
	// Threshold at 5 %: about the chi-square 95th percentile (37.65 for
	// d = 25), within the sampling error of a quantile of 20,000 frames.
	thr, err := rec.Threshold(0.05)
	if err != nil {
		t.Fatal(err)
	}
	if d == 25 {
		if got := thr * thr * 25; math.Abs(got-37.65) > 0.8 {
			t.Errorf("threshold at 5 %%: d D^2 = %.2f, chi-square(25) p95 37.65", got)
		}
	}
}

// TestMahalanobisShift: a frame moved by k standard deviations along one
// statistic of independent unit Gaussians has D^2 d = |z|^2 ~ k^2 + the
// chi-square of the rest: the shifted frames' mean d D^2 is d + k^2.
func TestMahalanobisShift(t *testing.T) {
	l := Layout{ImageBands: 1, MapBands: 1}
	d := l.Dim()
	rng := rand.New(rand.NewPCG(3, 4))
	id := mat.NewDense(d, d, nil)
	for i := range d {
		id.Set(i, i, 1)
	}
	mu := make([]float64, d)
	rec, err := Fit(l, gaussianFrames(rng, 20000, mu, id), FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := rec.NewScratch()
	const k = 6.0
	var sum float64
	test := gaussianFrames(rng, 4000, mu, id)
	for _, x := range test {
		x[0] += k
		dist, err := rec.Distance(x, s)
		if err != nil {
			t.Fatal(err)
		}
		sum += float64(d) * dist * dist
	}
	// Var(|z|^2) = 2(d-1) + 2 + 4k^2 for a noncentral chi-square.
	want, se := float64(d)+k*k, math.Sqrt((2*float64(d)+4*k*k)/4000)
	if got := sum / 4000; math.Abs(got-want) > 4*se+0.1 {
		t.Errorf("mean d D^2 of shifted frames %.3f, want %v +- %.3f", got, want, 4*se+0.1)
	}
}

// TestKNNDistanceExact: with k = 1 and standardized reference frames on
// a lattice, the distance of a point is its Euclidean distance to the
// nearest lattice point over sqrt(2d).
func TestKNNDistanceExact(t *testing.T) {
	l := Layout{ImageBands: 1, MapBands: 1}
	d := l.Dim()
	r := &Record{Version: RecordVersion, Statistic: KNN, Frames: 3, Layout: l, K: 1,
		Mean: make([]float64, d), Std: make([]float64, d), Reference: make([]float64, 3*d),
		Distances: []float64{1}, KS: make([]BandQuantiles, 1), BOverDepth: make([]BandQuantiles, 1)}
	for i := range d {
		r.Std[i] = 2 // z = x / 2
	}
	r.Reference[d] = 10 // frame 1: z_0 = 10
	r.Reference[2*d+1] = -3
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	s := r.NewScratch()
	x := make([]float64, d)
	x[0], x[1] = 16, 8 // z = (8, 4, 0...): nearest frame 1 at sqrt(4+16)
	got, err := r.Distance(x, s)
	if err != nil {
		t.Fatal(err)
	}
	if want := math.Sqrt(20) / math.Sqrt(2*float64(d)); math.Abs(got-want) > 1e-12 {
		t.Errorf("knn distance %v, want %v", got, want)
	}
	r.K = 2 // mean of the two nearest: frame 1 (sqrt 20) and frame 0 (sqrt 80)
	s = r.NewScratch()
	got, _ = r.Distance(x, s)
	if want := (math.Sqrt(20) + math.Sqrt(80)) / 2 / math.Sqrt(2*float64(d)); math.Abs(got-want) > 1e-12 {
		t.Errorf("knn k=2 distance %v, want %v", got, want)
	}
}

func TestThresholdAtFAR(t *testing.T) {
	scores := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, c := range []struct {
		far  float64
		want float64
	}{{0, 10}, {0.1, 9}, {0.15, 9}, {0.2, 8}, {0.5, 5}, {0.95, 1}} {
		got, err := ThresholdAtFAR(scores, c.far)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("far %v: threshold %v, want %v", c.far, got, c.want)
		}
		above := 0
		for _, s := range scores {
			if s > got {
				above++
			}
		}
		if float64(above) > c.far*float64(len(scores))+1e-9 {
			t.Errorf("far %v: %d of %d above %v", c.far, above, len(scores), got)
		}
	}
	if scores[0] != 5 {
		t.Error("ThresholdAtFAR sorted its argument")
	}
	for _, far := range []float64{-0.1, 1, math.NaN()} {
		if _, err := ThresholdAtFAR(scores, far); err == nil {
			t.Errorf("far %v accepted", far)
		}
	}
	if _, err := ThresholdAtFAR(nil, 0.01); err == nil {
		t.Error("no scores accepted")
	}
}

func TestRecordValidate(t *testing.T) {
	l := Layout{ImageBands: 1, MapBands: 1}
	rng := rand.New(rand.NewPCG(5, 6))
	id := mat.NewDense(l.Dim(), l.Dim(), nil)
	for i := range l.Dim() {
		id.Set(i, i, 1)
	}
	good, err := Fit(l, gaussianFrames(rng, 50, make([]float64, l.Dim()), id), FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want string
		edit       func(r *Record)
	}{
		{"version", "version: 2", func(r *Record) { r.Version = 2 }},
		{"statistic", "statistic", func(r *Record) { r.Statistic = "energy" }},
		{"mean", "mean: 3 values", func(r *Record) { r.Mean = r.Mean[:3] }},
		{"std zero", "std[0]", func(r *Record) { r.Std[0] = 0 }},
		{"precision", "precision", func(r *Record) { r.Precision = r.Precision[:1] }},
		{"nan", "non-finite", func(r *Record) { r.Mean[1] = math.NaN() }},
		{"bands", "ks, b_over_depth", func(r *Record) { r.KS = nil }},
		{"layout", "layout: map_bands", func(r *Record) { r.Layout.MapBands = 0 }},
	} {
		r := *good
		r.Mean, r.Std, r.Precision = append([]float64(nil), good.Mean...), append([]float64(nil), good.Std...), append([]float64(nil), good.Precision...)
		c.edit(&r)
		err := r.Validate()
		if err == nil || !contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", c.name, err, c.want)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestDistanceAllocatesNothing(t *testing.T) {
	l := DefaultLayout(true)
	rng := rand.New(rand.NewPCG(7, 8))
	id := mat.NewDense(l.Dim(), l.Dim(), nil)
	for i := range l.Dim() {
		id.Set(i, i, 1)
	}
	frames := gaussianFrames(rng, 100, make([]float64, l.Dim()), id)
	for _, stat := range []string{Mahalanobis, KNN} {
		rec, err := Fit(l, frames, FitOptions{Statistic: stat})
		if err != nil {
			t.Fatal(err)
		}
		s := rec.NewScratch()
		if n := testing.AllocsPerRun(100, func() { _, _ = rec.Distance(frames[3], s) }); n != 0 {
			t.Errorf("%s: Distance allocates %v times", stat, n)
		}
	}
}
