package domain

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// RecordVersion is the version of the Record format this package writes
// and reads.
const RecordVersion = 1

// Statistics a record can hold.
const (
	// Mahalanobis: D = sqrt(z' P z / d), P the inverse of the Ledoit-Wolf
	// shrinkage correlation of the standardized training statistics.
	Mahalanobis = "mahalanobis"
	// KNN: D = the mean Euclidean distance of z to its KNN nearest stored
	// training frames, over sqrt(2 d) (the expected distance of two
	// independent standardized frames is about sqrt(2 d)).
	KNN = "knn"
)

// DefaultK is the k of the k-nearest-neighbour statistic.
const DefaultK = 5

// Record is what a frame of the training domain looks like to the models:
// the statistics' standardization and covariance, the distance's
// in-domain values, and the frame-level distributions of K/S and b/depth
// per map band. It is written into the AuxUE's spec (runtime/infer
// AuxUEInfo.Domain) by train auxue.
type Record struct {
	Version   int    `yaml:"version"`
	Statistic string `yaml:"statistic"`
	// Source says which frames the record was fitted on.
	Source string `yaml:"source,omitempty"`
	Frames int    `yaml:"frames"`
	Layout Layout `yaml:"layout"`
	// Mean and Std standardize a frame's statistics: z = (x - Mean) / Std.
	Mean []float64 `yaml:"mean,flow"`
	Std  []float64 `yaml:"std,flow"`
	// Shrinkage is the Ledoit-Wolf weight of the identity in the
	// correlation estimate; Precision its inverse (d x d, row-major).
	Shrinkage float64   `yaml:"shrinkage"`
	Precision []float64 `yaml:"precision,flow,omitempty"`
	// K and Reference (Frames x d standardized training frames,
	// row-major) serve the k-nearest-neighbour statistic.
	K         int       `yaml:"k,omitempty"`
	Reference []float64 `yaml:"reference,flow,omitempty"`
	// Distances are the in-domain frames' distances, each computed by a
	// record fitted without that frame's fold (cross-validated), sorted.
	Distances []float64 `yaml:"distances,flow"`
	// KS and BOverDepth are the frame-level distributions of band-mean
	// K/S and of the band's geometric-mean b over geometric-mean depth.
	KS         []BandQuantiles `yaml:"ks"`
	BOverDepth []BandQuantiles `yaml:"b_over_depth"`
}

// BandQuantiles are quantiles over frames of one map band's value.
type BandQuantiles struct {
	P5  float64 `yaml:"p5"`
	P50 float64 `yaml:"p50"`
	P95 float64 `yaml:"p95"`
}

// Validate checks a record read from a file: its version, statistic,
// layout and the sizes of its arrays.
func (r *Record) Validate() error {
	if r.Version != RecordVersion {
		return fmt.Errorf("version: %d, this build reads %d", r.Version, RecordVersion)
	}
	if err := r.Layout.Validate(); err != nil {
		return fmt.Errorf("layout: %w", err)
	}
	d := r.Layout.Dim()
	switch {
	case r.Frames < 2:
		return fmt.Errorf("frames: %d, want at least 2", r.Frames)
	case len(r.Mean) != d:
		return fmt.Errorf("mean: %d values, layout has %d", len(r.Mean), d)
	case len(r.Std) != d:
		return fmt.Errorf("std: %d values, layout has %d", len(r.Std), d)
	case len(r.Distances) < 1:
		return errors.New("distances: none")
	case len(r.KS) != r.Layout.MapBands || len(r.BOverDepth) != r.Layout.MapBands:
		return fmt.Errorf("ks, b_over_depth: %d and %d bands, layout has %d", len(r.KS), len(r.BOverDepth), r.Layout.MapBands)
	}
	for i, s := range r.Std {
		if !(s > 0) || math.IsInf(s, 0) {
			return fmt.Errorf("std[%d]: %v, want > 0", i, s)
		}
	}
	for _, v := range [][]float64{r.Mean, r.Precision, r.Reference, r.Distances} {
		for _, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return errors.New("mean, precision, reference, distances: a non-finite value")
			}
		}
	}
	switch r.Statistic {
	case Mahalanobis:
		if len(r.Precision) != d*d {
			return fmt.Errorf("precision: %d values, want %d x %d", len(r.Precision), d, d)
		}
	case KNN:
		if r.K < 1 || r.K > r.Frames {
			return fmt.Errorf("k: %d, want 1..frames (%d)", r.K, r.Frames)
		}
		if len(r.Reference) != r.Frames*d {
			return fmt.Errorf("reference: %d values, want frames x %d", len(r.Reference), d)
		}
	default:
		return fmt.Errorf("statistic: %q, want %s or %s", r.Statistic, Mahalanobis, KNN)
	}
	return nil
}

// Scratch is the per-caller working memory of Distance (one per
// goroutine): NewScratch sizes it once so that Distance allocates nothing.
type Scratch struct {
	z    []float64
	best []float64
}

// NewScratch returns working memory for r's distances.
func (r *Record) NewScratch() *Scratch {
	return &Scratch{z: make([]float64, r.Layout.Dim()), best: make([]float64, max(r.K, 1))}
}

// Distance is the frame's distance to the training domain for statistics
// x (len Layout.Dim()): about 1 in the domain, larger outside it.
func (r *Record) Distance(x []float64, s *Scratch) (float64, error) {
	d := r.Layout.Dim()
	if len(x) != d {
		return 0, fmt.Errorf("domain distance: %d statistics, record has %d", len(x), d)
	}
	if s == nil || len(s.z) != d || len(s.best) < max(r.K, 1) {
		return 0, errors.New("domain distance: scratch not from this record's NewScratch")
	}
	z := s.z
	for i, v := range x {
		z[i] = (v - r.Mean[i]) / r.Std[i]
	}
	switch r.Statistic {
	case Mahalanobis:
		return math.Sqrt(max(0, quadForm(r.Precision, z)) / float64(d)), nil
	case KNN:
		return knnDistance(r.Reference, z, r.K, s.best) / math.Sqrt(2*float64(d)), nil
	}
	return 0, fmt.Errorf("domain distance: statistic %q", r.Statistic)
}

// quadForm is z' P z for a row-major symmetric P.
func quadForm(p, z []float64) float64 {
	d := len(z)
	var q float64
	for i := range d {
		row := p[i*d : (i+1)*d]
		var s float64
		for j, v := range z {
			s += row[j] * v
		}
		q += z[i] * s
	}
	return q
}

// knnDistance is the mean Euclidean distance of z to its k nearest rows
// of ref (best: k scratch values).
func knnDistance(ref, z []float64, k int, best []float64) float64 {
	d := len(z)
	best = best[:k]
	for i := range best {
		best[i] = math.Inf(1)
	}
	for off := 0; off+d <= len(ref); off += d {
		var s float64
		for j, v := range z {
			t := ref[off+j] - v
			s += t * t
		}
		if s < best[k-1] { // insertion into the sorted k best
			i := k - 1
			for i > 0 && best[i-1] > s {
				best[i] = best[i-1]
				i--
			}
			best[i] = s
		}
	}
	var m float64
	n := 0
	for _, s := range best {
		if !math.IsInf(s, 1) {
			m += math.Sqrt(s)
			n++
		}
	}
	return m / float64(max(n, 1))
}

// Threshold is the distance that a fraction far of in-domain frames
// exceeds (ThresholdAtFAR of the record's cross-validated distances).
func (r *Record) Threshold(far float64) (float64, error) {
	return ThresholdAtFAR(r.Distances, far)
}

// ThresholdAtFAR returns the smallest threshold t among the in-domain
// scores such that at most a fraction far of them is above t: the
// ceil((1-far) n)-th smallest score (nearest rank). scores need not be
// sorted and are not modified; far is in [0, 1).
func ThresholdAtFAR(scores []float64, far float64) (float64, error) {
	if len(scores) == 0 {
		return 0, errors.New("threshold at a false-alarm rate: no in-domain scores")
	}
	if !(far >= 0 && far < 1) {
		return 0, fmt.Errorf("threshold at a false-alarm rate: rate %v, want [0, 1)", far)
	}
	s := slices.Clone(scores)
	slices.Sort(s)
	rank := int(math.Ceil((1 - far) * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1], nil
}

// FitOptions choose the statistic a record is fitted for.
type FitOptions struct {
	Statistic string // Mahalanobis (default) or KNN
	K         int    // KNN's k (0: DefaultK)
	Folds     int    // cross-validation folds of the in-domain distances (0: 5)
	Source    string
}

// Fit builds a record from the statistics of in-domain frames (each row
// Layout.Dim() values). The in-domain distances are cross-validated: each
// frame's distance comes from a record fitted on the other folds (frames
// i with i mod folds != f), so that the threshold at a false-alarm rate
// holds for frames the record did not see.
func Fit(l Layout, frames [][]float64, opt FitOptions) (*Record, error) {
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("domain fit: layout: %w", err)
	}
	if opt.Statistic == "" {
		opt.Statistic = Mahalanobis
	}
	if opt.K == 0 {
		opt.K = DefaultK
	}
	if opt.Folds == 0 {
		opt.Folds = 5
	}
	d, n := l.Dim(), len(frames)
	if n < 2*opt.Folds || n < opt.K+2 {
		return nil, fmt.Errorf("domain fit: %d frames, want at least %d", n, max(2*opt.Folds, opt.K+2))
	}
	for i, f := range frames {
		if len(f) != d {
			return nil, fmt.Errorf("domain fit: frame %d has %d statistics, layout has %d", i, len(f), d)
		}
		for _, v := range f {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("domain fit: frame %d has a non-finite statistic", i)
			}
		}
	}
	r, err := fitCore(l, frames, opt)
	if err != nil {
		return nil, err
	}
	// Cross-validated in-domain distances.
	dist := make([]float64, 0, n)
	for f := range opt.Folds {
		var train, test [][]float64
		for i, x := range frames {
			if i%opt.Folds == f {
				test = append(test, x)
			} else {
				train = append(train, x)
			}
		}
		rf, err := fitCore(l, train, opt)
		if err != nil {
			return nil, err
		}
		s := rf.NewScratch()
		for _, x := range test {
			v, err := rf.Distance(x, s)
			if err != nil {
				return nil, err
			}
			dist = append(dist, v)
		}
	}
	slices.Sort(dist)
	r.Distances = dist
	r.KS, r.BOverDepth = bandDistributions(l, frames)
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("domain fit: %w", err)
	}
	return r, nil
}

// stdFloor keeps a constant statistic from dividing by zero: its z is 0
// for in-domain frames and large for any frame that moves it.
const stdFloor = 1e-6

// fitCore fits standardization and the statistic's model on frames.
func fitCore(l Layout, frames [][]float64, opt FitOptions) (*Record, error) {
	d, n := l.Dim(), len(frames)
	r := &Record{Version: RecordVersion, Statistic: opt.Statistic, Source: opt.Source, Frames: n, Layout: l,
		Mean: make([]float64, d), Std: make([]float64, d)}
	for _, f := range frames {
		for j, v := range f {
			r.Mean[j] += v
		}
	}
	for j := range r.Mean {
		r.Mean[j] /= float64(n)
	}
	for _, f := range frames {
		for j, v := range f {
			t := v - r.Mean[j]
			r.Std[j] += t * t
		}
	}
	for j := range r.Std {
		r.Std[j] = max(math.Sqrt(r.Std[j]/float64(n)), stdFloor*max(1, math.Abs(r.Mean[j])))
	}
	z := mat.NewDense(n, d, nil)
	for i, f := range frames {
		for j, v := range f {
			z.Set(i, j, (v-r.Mean[j])/r.Std[j])
		}
	}
	switch opt.Statistic {
	case Mahalanobis:
		cov, lambda := ledoitWolf(z)
		var ch mat.Cholesky
		if !ch.Factorize(cov) {
			return nil, errors.New("domain fit: shrunk correlation is not positive definite")
		}
		var inv mat.SymDense
		if err := ch.InverseTo(&inv); err != nil {
			return nil, fmt.Errorf("domain fit: invert correlation: %w", err)
		}
		r.Shrinkage = lambda
		r.Precision = make([]float64, d*d)
		for i := range d {
			for j := range d {
				r.Precision[i*d+j] = inv.At(i, j)
			}
		}
	case KNN:
		if opt.K < 1 || opt.K > n {
			return nil, fmt.Errorf("domain fit: k %d, want 1..%d", opt.K, n)
		}
		r.K = opt.K
		r.Reference = slices.Clone(z.RawMatrix().Data)
	default:
		return nil, fmt.Errorf("domain fit: statistic %q, want %s or %s", opt.Statistic, Mahalanobis, KNN)
	}
	return r, nil
}

// ledoitWolf is the Ledoit-Wolf (2004) shrinkage estimate of the
// covariance of the centred rows of x toward mu I, mu = tr(S)/d:
//
//	S = X'X / n,  delta = ||S - mu I||_F^2 / d,
//	beta = min(delta, sum_i ||x_i x_i' - S||_F^2 / (n^2 d)),
//	lambda = beta / delta,  Sigma = (1 - lambda) S + lambda mu I,
//
// the form scikit-learn's ledoit_wolf computes. It also returns lambda.
func ledoitWolf(x *mat.Dense) (*mat.SymDense, float64) {
	n, d := x.Dims()
	var s mat.SymDense
	s.SymOuterK(1/float64(n), x.T())
	var mu float64
	for i := range d {
		mu += s.At(i, i)
	}
	mu /= float64(d)
	var delta float64
	for i := range d {
		for j := range d {
			t := s.At(i, j)
			if i == j {
				t -= mu
			}
			delta += t * t
		}
	}
	delta /= float64(d)
	var beta float64
	for k := range n {
		row := x.RawRowView(k)
		for i := range d {
			for j := range d {
				t := row[i]*row[j] - s.At(i, j)
				beta += t * t
			}
		}
	}
	beta /= float64(n) * float64(n) * float64(d)
	lambda := 0.0
	if delta > 0 {
		lambda = min(beta, delta) / delta
	}
	out := mat.NewSymDense(d, nil)
	for i := range d {
		for j := i; j < d; j++ {
			v := (1 - lambda) * s.At(i, j)
			if i == j {
				v += lambda * mu
			}
			out.SetSym(i, j, v)
		}
	}
	return out, lambda
}

// bandDistributions are the frame-level quantiles of each map band's
// mean K/S and of exp(mean log b - mean log depth).
func bandDistributions(l Layout, frames [][]float64) (ks, bd []BandQuantiles) {
	vals := make([]float64, len(frames))
	q := func() BandQuantiles {
		slices.Sort(vals)
		at := func(p float64) float64 { return vals[int(math.Round(p*float64(len(vals)-1)))] }
		return BandQuantiles{P5: at(0.05), P50: at(0.5), P95: at(0.95)}
	}
	for b := range l.MapBands {
		for i, f := range frames {
			vals[i] = f[l.ksBands()+b]
		}
		ks = append(ks, q())
		for i, f := range frames {
			vals[i] = math.Exp(f[l.scaleBands()+b] - f[l.depthBands()+b])
		}
		bd = append(bd, q())
	}
	return ks, bd
}
