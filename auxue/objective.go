package auxue

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/didoedge/didoedge/pkg/nn"
)

// Samples is an in-memory AuxUE data set. The main model is frozen, so its
// errors and their DIDO bins are computed once, before training.
type Samples struct {
	// X holds the inputs of all samples back to back, each of shape Shape:
	// (F) for FormVector, (C, H, W) for FormDense.
	X     []float32
	Shape []int
	// Err holds the signed main-task errors y - f(x), (N, HW).
	Err []float32
	// Valid marks the elements with ground truth (N, HW); nil means all.
	Valid []bool
	// Bins holds the DIDO targets (N, HW), -1 outside the loss; see Discretizer.
	Bins []int32
}

func (s *Samples) sampleSize() (size, hw int) {
	size, hw = 1, 1
	for _, d := range s.Shape {
		size *= d
	}
	if len(s.Shape) == 3 {
		hw = s.Shape[1] * s.Shape[2]
	}
	return size, hw
}

// Len returns the number of samples.
func (s *Samples) Len() int {
	size, _ := s.sampleSize()
	if size == 0 {
		return 0
	}
	return len(s.X) / size
}

// Check validates the sizes against a model configuration.
func (s *Samples) Check(cfg Config) error {
	want := 1
	if cfg.Form == FormDense {
		want = 3
	}
	if len(s.Shape) != want || s.Shape[0] != cfg.In {
		return fmt.Errorf("samples: per-sample shape %v does not fit a model with %d inputs (form %d)", s.Shape, cfg.In, cfg.Form)
	}
	size, hw := s.sampleSize()
	if size <= 0 || len(s.X)%size != 0 {
		return fmt.Errorf("samples: %d input values are not a whole number of samples of shape %v", len(s.X), s.Shape)
	}
	n := len(s.X) / size
	switch {
	case len(s.Err) != n*hw:
		return fmt.Errorf("samples: %d errors, want %d (N=%d, HW=%d)", len(s.Err), n*hw, n, hw)
	case s.Valid != nil && len(s.Valid) != n*hw:
		return fmt.Errorf("samples: %d mask values, want %d", len(s.Valid), n*hw)
	case len(s.Bins) != n*hw:
		return fmt.Errorf("samples: %d bins, want %d (run a Discretizer first)", len(s.Bins), n*hw)
	}
	for i, v := range s.X {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("samples: input value %d (sample %d) is %v", i, i/size, v)
		}
	}
	return nil
}

// Discretize fills Bins from Err: per data set for vectors, per image for maps.
func (s *Samples) Discretize(k int) error {
	d, err := NewDiscretizer(k)
	if err != nil {
		return err
	}
	_, hw := s.sampleSize()
	abs := make([]float32, len(s.Err))
	for i, e := range s.Err {
		abs[i] = float32(math.Abs(float64(e)))
	}
	if len(s.Bins) != len(abs) {
		s.Bins = make([]int32, len(abs))
	}
	if hw == 1 {
		_, err = d.Dataset(abs, s.Valid, s.Bins)
		return err
	}
	return d.PerImage(abs, s.Valid, len(abs)/hw, hw, s.Bins)
}

// AuxObjective trains a Model on Samples; it implements Objective.
type AuxObjective struct {
	Model      *Model
	Train, Val *Samples
	Last       Losses // parts of the last training step

	batches map[int]*batchBuf
}

type batchBuf struct {
	x     *tensor.Dense
	errs  []float32
	valid []bool
	bins  []int32
}

// NewAuxObjective checks the data sets against the model.
func NewAuxObjective(m *Model, train, val *Samples) (*AuxObjective, error) {
	if err := train.Check(m.Config); err != nil {
		return nil, fmt.Errorf("training set: %w", err)
	}
	if val != nil {
		if err := val.Check(m.Config); err != nil {
			return nil, fmt.Errorf("validation set: %w", err)
		}
	}
	return &AuxObjective{Model: m, Train: train, Val: val, batches: map[int]*batchBuf{}}, nil
}

// gather copies the samples idx of s into a batch buffer of that size.
func (o *AuxObjective) gather(s *Samples, idx []int) *batchBuf {
	size, hw := s.sampleSize()
	n := len(idx)
	b := o.batches[n]
	if b == nil {
		b = &batchBuf{x: nn.NewDense(append([]int{n}, s.Shape...)...),
			errs: make([]float32, n*hw), valid: make([]bool, n*hw), bins: make([]int32, n*hw)}
		o.batches[n] = b
	}
	x := nn.Data(b.x)
	for i, j := range idx {
		copy(x[i*size:(i+1)*size], s.X[j*size:(j+1)*size])
		copy(b.errs[i*hw:(i+1)*hw], s.Err[j*hw:(j+1)*hw])
		copy(b.bins[i*hw:(i+1)*hw], s.Bins[j*hw:(j+1)*hw])
		if s.Valid != nil {
			copy(b.valid[i*hw:(i+1)*hw], s.Valid[j*hw:(j+1)*hw])
		} else {
			for k := i * hw; k < (i+1)*hw; k++ {
				b.valid[k] = true
			}
		}
	}
	return b
}

// Step implements Objective.
func (o *AuxObjective) Step(idx []int) (float64, error) {
	b := o.gather(o.Train, idx)
	l, err := o.Model.Step(b.x, b.errs, b.valid, b.bins)
	if err != nil {
		return 0, err
	}
	o.Last = l
	return l.Total(), nil
}

// Validate implements Objective: the element-weighted mean of both losses
// over the validation set, in batches of 64 samples.
func (o *AuxObjective) Validate() (float64, error) {
	if o.Val == nil || o.Val.Len() == 0 {
		return math.NaN(), nil
	}
	const batch = 64
	n := o.Val.Len()
	idx := make([]int, 0, batch)
	var alea, epis float64
	var nv, nb int
	for start := 0; start < n; start += batch {
		idx = idx[:0]
		for j := start; j < min(start+batch, n); j++ {
			idx = append(idx, j)
		}
		b := o.gather(o.Val, idx)
		l, err := o.Model.Evaluate(b.x, b.errs, b.valid, b.bins)
		if err != nil {
			return 0, err
		}
		alea += l.Aleatoric * float64(l.Valid)
		epis += l.Epistemic * float64(l.Binned)
		nv += l.Valid
		nb += l.Binned
	}
	var total float64
	if nv > 0 {
		total += alea / float64(nv)
	}
	if nb > 0 {
		total += epis / float64(nb)
	}
	return total, nil
}

// Params implements Objective.
func (o *AuxObjective) Params() []NamedParam { return o.Model.Params() }
