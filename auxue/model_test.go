package auxue

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/pkg/nn"
	"github.com/didoedge/didoedge/pkg/nn/gradcheck"
)

// smallSamples returns n random samples for cfg with binned errors.
func smallSamples(t *testing.T, cfg Config, n, h, w int, seed uint64) *Samples {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	s := &Samples{Shape: []int{cfg.In}}
	hw := 1
	if cfg.Form == FormDense {
		s.Shape = []int{cfg.In, h, w}
		hw = h * w
	}
	s.X = make([]float32, n*cfg.In*hw)
	for i := range s.X {
		s.X[i] = float32(rng.NormFloat64())
	}
	s.Err = make([]float32, n*hw)
	s.Valid = make([]bool, n*hw)
	for i := range s.Err {
		s.Err[i] = float32(rng.NormFloat64())
		s.Valid[i] = rng.IntN(4) != 0
	}
	if err := s.Discretize(cfg.K); err != nil {
		t.Fatal(err)
	}
	return s
}

// The model's analytic parameter gradients of L(Theta1) + L(Theta2) match
// central differences, for both forms and both encoder layouts.
func TestModelGradients(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"vector no encoder laplace", Config{Form: FormVector, In: 3, Hidden: 5, K: 3, Lambda: 0.1}},
		{"vector shared encoder nig", Config{Form: FormVector, In: 3, EncoderWidth: 4, SharedEncoder: true, Hidden: 5, K: 3, Lambda: 0.1,
			Aleatoric: AleatoricLoss{Kind: NIG}}},
		{"vector separate encoders ggau softplus", Config{Form: FormVector, In: 3, EncoderWidth: 4, Hidden: 5, K: 4, Lambda: 0.01,
			Aleatoric: AleatoricLoss{Kind: GenGaussian, Activation: ActSoftplus}}},
		{"dense shared encoder laplace", Config{Form: FormDense, In: 2, EncoderWidth: 3, SharedEncoder: true, Hidden: 3, K: 3, Lambda: 0.1}},
		{"dense separate encoders gaussian", Config{Form: FormDense, In: 2, EncoderWidth: 3, Hidden: 3, K: 3, Lambda: 0.1,
			Aleatoric: AleatoricLoss{Kind: Gaussian}}},
		// a quarter of the pixels have no ground truth (bin -1): the KL on them
		// must reach the parameters through the same backward pass.
		{"dense separate encoders unlabeled KL", Config{Form: FormDense, In: 2, EncoderWidth: 3, Hidden: 3, K: 3, Lambda: 0.1,
			UnlabeledKL: 0.5}},
		{"dense global context", Config{Form: FormDense, In: 2, EncoderWidth: 3, Hidden: 3, K: 3, Lambda: 0.1,
			UnlabeledKL: 0.5, GlobalContext: true}},
		{"dense global context in bands", Config{Form: FormDense, In: 2, EncoderWidth: 3, Hidden: 3, K: 3, Lambda: 0.1,
			UnlabeledKL: 0.5, GlobalContext: true, GlobalContextBands: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewModel(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			s := smallSamples(t, tt.cfg, 3, 3, 4, 9)
			x := nn.NewDense(append([]int{3}, s.Shape...)...)
			copy(nn.Data(x), s.X)
			params := make([]*nn.Param, 0)
			for _, p := range m.Params() {
				params = append(params, p.Param)
			}
			nn.ZeroGrad(params)
			if _, err := m.Step(x, s.Err, s.Valid, s.Bins); err != nil {
				t.Fatal(err)
			}
			loss := func() float64 {
				l, err := m.Evaluate(x, s.Err, s.Valid, s.Bins)
				if err != nil {
					t.Fatal(err)
				}
				return l.Total()
			}
			for _, p := range m.Params() {
				num := gradcheck.NumericGrad(loss, nn.Data(p.Value), 1e-3)
				// float32 forward passes: absolute noise around 1e-4.
				if err := gradcheck.Check(nn.Data(p.Grad), num, gradcheck.Tolerance{Rel: 3e-2, Abs: 2e-3}); err != nil {
					t.Errorf("%s: %v", p.Name, err)
				}
			}
		})
	}
}

func TestModelBadInput(t *testing.T) {
	cfg := Config{Form: FormDense, In: 2, EncoderWidth: 3, SharedEncoder: true, Hidden: 3, K: 3}
	m, err := NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nanX := nn.NewDense(1, 2, 2, 2)
	nn.Data(nanX)[3] = float32(math.NaN())
	tests := []struct {
		name    string
		run     func() error
		wantErr string
	}{
		{"K<2", func() error { _, err := NewModel(Config{In: 1, Hidden: 1, K: 1}); return err }, "at least 2 bins"},
		{"no input", func() error { _, err := NewModel(Config{Hidden: 1, K: 2}); return err }, "input width"},
		{"negative unlabeled KL", func() error {
			_, err := NewModel(Config{In: 1, Hidden: 1, K: 2, UnlabeledKL: -0.1})
			return err
		}, "unlabeled KL weight"},
		{"global context on vectors", func() error {
			_, err := NewModel(Config{Form: FormVector, In: 1, Hidden: 1, K: 2, GlobalContext: true})
			return err
		}, "global context needs the dense form"},
		{"wrong rank", func() error { _, _, err := m.Forward(nn.NewDense(2, 2), nn.Eval); return err }, "want (N, 2, H, W)"},
		{"wrong channels", func() error { _, _, err := m.Forward(nn.NewDense(1, 3, 2, 2), nn.Eval); return err }, "want (N, 2, H, W)"},
		{"empty batch", func() error { _, _, err := m.Forward(nn.NewDense(0, 2, 2, 2), nn.Eval); return err }, "empty batch"},
		{"NaN input", func() error { _, _, err := m.Forward(nanX, nn.Eval); return err }, "input contains NaN"},
		{"errors mismatch", func() error {
			_, err := m.Step(nn.NewDense(1, 2, 2, 2), make([]float32, 3), nil, make([]int32, 4))
			return err
		}, "target has 3"},
		{"bad coverage", func() error { return m.Predict(nn.NewDense(1, 2, 2, 2), 1, &Prediction{}) }, "coverage"},
		{"samples shape", func() error {
			_, err := NewAuxObjective(m, &Samples{X: make([]float32, 8), Shape: []int{4}, Err: make([]float32, 2), Bins: make([]int32, 2)}, nil)
			return err
		}, "does not fit"},
		{"samples NaN", func() error {
			s := &Samples{X: []float32{0, 0, 0, float32(math.Inf(1)), 0, 0, 0, 0}, Shape: []int{2, 2, 2}, Err: make([]float32, 4), Bins: make([]int32, 4)}
			_, err := NewAuxObjective(m, s, nil)
			return err
		}, "input value 3 (sample 0) is +Inf"},
		{"samples without bins", func() error {
			_, err := NewAuxObjective(m, &Samples{X: make([]float32, 8), Shape: []int{2, 2, 2}, Err: make([]float32, 4)}, nil)
			return err
		}, "run a Discretizer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestPredictReadOuts(t *testing.T) {
	cfg := Config{Form: FormDense, In: 2, EncoderWidth: 3, Hidden: 3, K: 4}
	m, _ := NewModel(cfg)
	x := nn.NewDense(2, 2, 3, 5)
	for i, v := range rand.New(rand.NewPCG(1, 2)).Perm(len(nn.Data(x))) {
		nn.Data(x)[i] = float32(v) / 30
	}
	var p Prediction
	if err := m.Predict(x, 0.9, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Scale) != 30 || len(p.Epistemic) != 30 || len(p.Bin) != 30 {
		t.Fatalf("read-out sizes %d %d %d", len(p.Scale), len(p.Epistemic), len(p.Bin))
	}
	for i := range p.Scale {
		// Laplace: half-width = b ln 10 at 90% coverage; K/S in (0, 1].
		if math.Abs(float64(p.HalfWidth[i])-float64(p.Scale[i])*math.Log(10)) > 1e-4*float64(p.HalfWidth[i]) {
			t.Fatalf("half-width %v for scale %v", p.HalfWidth[i], p.Scale[i])
		}
		if !(p.Epistemic[i] > 0 && p.Epistemic[i] <= 1) || p.Bin[i] < 0 || p.Bin[i] >= 4 {
			t.Fatalf("epistemic %v bin %v", p.Epistemic[i], p.Bin[i])
		}
	}
}

// nanObjective produces a NaN gradient at a chosen step.
type nanObjective struct {
	p     NamedParam
	steps int
	at    int
	what  string
}

func (o *nanObjective) Step([]int) (float64, error) {
	o.steps++
	if o.steps-1 == o.at {
		switch o.what {
		case "loss":
			return math.Inf(1), nil
		case "grad":
			nn.Data(o.p.Grad)[1] = float32(math.NaN())
		case "param":
			nn.Data(o.p.Value)[0] = float32(math.Inf(1)) // a corrupted weight survives the update
		}
	}
	nn.Data(o.p.Grad)[0] += 0.1
	return 1, nil
}
func (o *nanObjective) Validate() (float64, error) { return math.NaN(), nil }
func (o *nanObjective) Params() []NamedParam       { return []NamedParam{o.p} }

func TestTrainStopsOnNonFinite(t *testing.T) {
	tests := []struct {
		what, wantErr string
	}{
		{"loss", "step 5: loss is +Inf"},
		{"grad", "step 5: gradient of head.w is NaN at index 1"},
		{"param", "step 5: after the update: parameter head.w is"},
	}
	for _, tt := range tests {
		t.Run(tt.what, func(t *testing.T) {
			p := NamedParam{"head.w", &nn.Param{Name: "w", Value: nn.NewDense(2), Grad: nn.NewDense(2)}}
			o := &nanObjective{p: p, at: 5, what: tt.what}
			_, err := Train(context.Background(), o, 10, TrainConfig{Epochs: 3, BatchSize: 4, LR: 1e-3, Name: "t"})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
	// Cancellation stops at the next step.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o := &nanObjective{p: NamedParam{"w", &nn.Param{Value: nn.NewDense(2), Grad: nn.NewDense(2)}}, at: -1}
	if _, err := Train(ctx, o, 10, TrainConfig{Epochs: 1, BatchSize: 4, LR: 1e-3}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled training: %v", err)
	}
	if _, err := Train(context.Background(), o, 0, TrainConfig{Epochs: 1, BatchSize: 4, LR: 1e-3}); err == nil {
		t.Error("training on no samples accepted")
	}
}

// A short real training run lowers both losses on a learnable problem: the
// error scale depends on the first feature and the bins follow it.
func TestTrainLowersLoss(t *testing.T) {
	cfg := Config{Form: FormVector, In: 2, EncoderWidth: 16, SharedEncoder: true, Hidden: 16, K: 4, Lambda: 0.01, Seed: 3}
	m, _ := NewModel(cfg)
	rng := rand.New(rand.NewPCG(4, 5))
	s := &Samples{Shape: []int{2}, X: make([]float32, 2*512), Err: make([]float32, 512)}
	for i := 0; i < 512; i++ {
		a := rng.Float64()*2 - 1
		s.X[2*i], s.X[2*i+1] = float32(a), float32(rng.NormFloat64())
		s.Err[i] = float32(rng.NormFloat64() * math.Exp(2*a))
	}
	if err := s.Discretize(4); err != nil {
		t.Fatal(err)
	}
	obj, err := NewAuxObjective(m, s, s)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := obj.Validate()
	var log strings.Builder
	hist, err := Train(context.Background(), obj, s.Len(), TrainConfig{Epochs: 15, BatchSize: 64, LR: 5e-3, EndLR: 5e-4, Power: 0.9, Seed: 1, Progress: &log, Name: "aux"})
	if err != nil {
		t.Fatal(err)
	}
	after := hist[len(hist)-1].ValLoss
	if !(after < before-0.2) {
		t.Errorf("validation loss %v -> %v, want a drop of at least 0.2", before, after)
	}
	if got := strings.Count(log.String(), "\n"); got != 15 || !strings.Contains(log.String(), "aux epoch 15/15") {
		t.Errorf("progress output:\n%s", log.String())
	}
	if lr := hist[len(hist)-1].LR; math.Abs(lr-nn.PolyDecay(5e-3, 5e-4, 15*8-1, 15*8, 0.9)) > 1e-12 {
		t.Errorf("final lr %v", lr)
	}
}

// Dense maps end to end: per-image bins with a mask, a few epochs of the
// conv form with a shared encoder lower the validation loss.
func TestTrainDenseMaps(t *testing.T) {
	cfg := Config{Form: FormDense, In: 2, EncoderWidth: 4, SharedEncoder: true, Hidden: 4, K: 4, Lambda: 0.01, Seed: 5}
	m, err := NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(6, 7))
	const n, h, w = 16, 6, 8
	s := &Samples{Shape: []int{2, h, w}, X: make([]float32, n*2*h*w), Err: make([]float32, n*h*w), Valid: make([]bool, n*h*w)}
	for i := 0; i < n; i++ {
		for j := 0; j < h*w; j++ {
			a := rng.Float64()*2 - 1 // channel 0 carries the error scale
			s.X[(i*2)*h*w+j], s.X[(i*2+1)*h*w+j] = float32(a), float32(rng.NormFloat64())
			s.Err[i*h*w+j] = float32(rng.NormFloat64() * math.Exp(2*a))
			s.Valid[i*h*w+j] = j%5 != 0
		}
	}
	if err := s.Discretize(cfg.K); err != nil {
		t.Fatal(err)
	}
	for i, b := range s.Bins {
		if (b < 0) == s.Valid[i] {
			t.Fatalf("bin %d at a pixel with valid=%v", b, s.Valid[i])
		}
	}
	obj, err := NewAuxObjective(m, s, s)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := obj.Validate()
	hist, err := Train(context.Background(), obj, n, TrainConfig{Epochs: 20, BatchSize: 4, LR: 1e-2, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if after := hist[len(hist)-1].ValLoss; !(after < before-0.1) {
		t.Errorf("validation loss %v -> %v, want a drop of at least 0.1", before, after)
	}
}
