package auxue

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gorgonia.org/tensor"

	"github.com/didoedge/didoedge/pkg/nn"
)

// Form selects the shape of the AuxUE's input and outputs.
type Form int

const (
	// FormVector works on (N, F) feature vectors with fully connected layers
	// (the toy and image-level tasks). HW = 1.
	FormVector Form = iota
	// FormDense works on (N, C, H, W) maps with convolutions and predicts per
	// pixel (monocular depth). HW = H*W.
	FormDense
)

// Config describes a generalized AuxUE.
type Config struct {
	Form Form
	// In is the number of input features (FormVector) or channels (FormDense,
	// e.g. 3 image channels + 1 predicted-depth channel).
	In int
	// EncoderWidth is the width of the encoder; 0 means no encoder (the heads
	// read the input directly, as in the toy, whose input is already the
	// main model's penultimate features).
	EncoderWidth int
	// SharedEncoder makes both heads read one encoder; otherwise each head has
	// its own (paper A.5 compares both).
	SharedEncoder bool
	// Hidden is the width of the epistemic head's hidden layers (toy: 300).
	Hidden int
	// GlobalContext (dense form) starts sigma_Theta2 with nn.GlobalContext:
	// each pixel's features are joined by the frame's channel means, so the
	// evidence can depend on the whole frame (a dataset change is a property
	// of the frame, not of a 9 x 9 patch).
	GlobalContext bool
	// GlobalContextBands splits the frame into that many horizontal bands
	// of equal height and joins the channel means of each (nn.GlobalContext
	// Bands); 0 or 1 is the whole frame. The height must be a multiple.
	GlobalContextBands int
	// Aleatoric is the sigma_Theta1 loss (Laplace by default).
	Aleatoric AleatoricLoss
	// K and Lambda configure DIDO on sigma_Theta2.
	K      int
	Lambda float64
	// UnlabeledKL (gamma) keeps the regularizer gamma * Lambda *
	// KL(Dir(alpha) || Dir(1)) on the elements without ground truth (bin < 0),
	// whose one-hot target of eq. 4 is all zeros; 0 trains DIDO on the
	// labeled elements only. See DIDOLoss.UnlabeledWeight.
	UnlabeledKL float64
	// Seed initializes the weights.
	Seed uint64
}

// Model is a generalized AuxUE: sigma_Theta1 (AleaHead, raw distribution
// parameters) and sigma_Theta2 (EpisHead, DIDO logits) on top of optional
// encoders. The positivity activation of Theta1 (Config.Aleatoric.Activation)
// and the clamped exp evidence of Theta2 (DIDO.MaxLogit) follow the heads and
// are applied by the losses and read-outs; an exporter appends them as nodes.
//
// Layer stacks (W = EncoderWidth or In, H = Hidden, P = parameters, K = bins):
//
//	vector encoder:  Linear(In,W) ReLU
//	dense encoder:   Conv3x3(In,W) ReLU Conv3x3 dilation 2 (W,W) ReLU
//	vector Theta1:   Linear(W,P)                     (paper A.1: one FC + exp)
//	dense Theta1:    Conv1x1(W,1), or Conv3x3(W,W) ReLU Conv1x1(W,P) for P > 1 (A.5)
//	vector Theta2:   Cosine(W,H) ReLU Linear(H,K)    (A.1: cosine layer + hidden layer + exp)
//	dense Theta2:    Cosine(W,H) ReLU Conv3x3(H,H) ReLU Conv1x1(H,K)  (A.5)
//	                 GlobalContext Cosine(W+W*B,H) ... with Config.GlobalContext (B bands)
type Model struct {
	Config Config
	// Encoder feeds AleaHead, and EpisHead too when SharedEncoder; nil without encoder.
	Encoder *nn.Sequential
	// EpisEncoder feeds EpisHead when the encoders are separate; nil otherwise.
	EpisEncoder *nn.Sequential
	AleaHead    *nn.Sequential
	EpisHead    *nn.Sequential
	DIDO        DIDOLoss

	named         []NamedParam
	dRaw, dLogits *tensor.Dense // loss gradients, reused across steps
	dShared       *tensor.Dense // summed gradient of a shared encoder
	n, hw         int           // layout of the last Forward
}

// NamedParam is a parameter with a path that names it in errors and checkpoints.
type NamedParam struct {
	Name string
	*nn.Param
}

// NewModel builds the AuxUE described by cfg.
func NewModel(cfg Config) (*Model, error) {
	switch {
	case cfg.In < 1:
		return nil, fmt.Errorf("auxue model: input width %d, want at least 1", cfg.In)
	case cfg.K < 2:
		return nil, fmt.Errorf("auxue model: K = %d, want at least 2 bins", cfg.K)
	case cfg.Hidden < 1:
		return nil, fmt.Errorf("auxue model: hidden width %d, want at least 1", cfg.Hidden)
	case cfg.EncoderWidth < 0:
		return nil, fmt.Errorf("auxue model: encoder width %d is negative", cfg.EncoderWidth)
	case cfg.Lambda < 0 || math.IsNaN(cfg.Lambda):
		return nil, fmt.Errorf("auxue model: lambda %v, want >= 0", cfg.Lambda)
	case cfg.UnlabeledKL < 0 || math.IsNaN(cfg.UnlabeledKL):
		return nil, fmt.Errorf("auxue model: unlabeled KL weight %v, want >= 0", cfg.UnlabeledKL)
	case cfg.Form != FormVector && cfg.Form != FormDense:
		return nil, fmt.Errorf("auxue model: unknown form %d", cfg.Form)
	case cfg.GlobalContext && cfg.Form != FormDense:
		return nil, fmt.Errorf("auxue model: global context needs the dense form (images)")
	case cfg.GlobalContextBands < 0:
		return nil, fmt.Errorf("auxue model: %d global context bands, want >= 0", cfg.GlobalContextBands)
	}
	if cfg.Aleatoric.Kind < Laplace || cfg.Aleatoric.Kind > NIG {
		return nil, fmt.Errorf("auxue model: unknown aleatoric loss %d", cfg.Aleatoric.Kind)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x417578))
	m := &Model{Config: cfg, DIDO: DIDOLoss{K: cfg.K, Lambda: cfg.Lambda, UnlabeledWeight: cfg.UnlabeledKL}}
	w := cfg.In
	var err error
	if cfg.EncoderWidth > 0 {
		w = cfg.EncoderWidth
		if m.Encoder, err = m.encoder(rng); err != nil {
			return nil, err
		}
		if !cfg.SharedEncoder {
			if m.EpisEncoder, err = m.encoder(rng); err != nil {
				return nil, err
			}
		}
	}
	p, h, k := cfg.Aleatoric.Kind.NumParams(), cfg.Hidden, cfg.K
	if cfg.Form == FormVector {
		m.AleaHead = &nn.Sequential{Layers: []nn.Layer{nn.NewLinear(w, p, rng)}}
		m.EpisHead = &nn.Sequential{Layers: []nn.Layer{nn.NewCosineSimilarity(w, h, rng), &nn.ReLU{}, nn.NewLinear(h, k, rng)}}
	} else {
		cv := &convs{rng: rng}
		var layers []nn.Layer
		if p > 1 {
			layers = append(layers, cv.conv(w, w, 3, 1), &nn.ReLU{})
		}
		m.AleaHead = &nn.Sequential{Layers: append(layers, cv.conv(w, p, 1, 1))}
		var epis []nn.Layer
		cosIn := w
		if cfg.GlobalContext {
			gc := &nn.GlobalContext{Bands: cfg.GlobalContextBands}
			epis, cosIn = append(epis, gc), gc.OutChannels(w)
		}
		m.EpisHead = &nn.Sequential{Layers: append(epis, nn.NewCosineSimilarity(cosIn, h, rng), &nn.ReLU{},
			cv.conv(h, h, 3, 1), &nn.ReLU{}, cv.conv(h, k, 1, 1))}
		if cv.err != nil {
			return nil, cv.err
		}
	}
	for _, part := range []struct {
		name string
		seq  *nn.Sequential
	}{{"encoder", m.Encoder}, {"epis_encoder", m.EpisEncoder}, {"alea_head", m.AleaHead}, {"epis_head", m.EpisHead}} {
		if part.seq == nil {
			continue
		}
		for i, l := range part.seq.Layers {
			for _, p := range l.Params() {
				m.named = append(m.named, NamedParam{fmt.Sprintf("%s.%d.%s", part.name, i, p.Name), p})
			}
		}
	}
	return m, nil
}

// convs builds same-size convolutions and keeps the first error, so that
// the layer lists read as one expression.
type convs struct {
	rng *rand.Rand
	err error
}

func (c *convs) conv(in, out, kernel, dilation int) nn.Layer {
	l, err := nn.NewConv2d(nn.Conv2dConfig{In: in, Out: out, Kernel: kernel, Stride: 1,
		Padding: dilation * (kernel - 1) / 2, Dilation: dilation, Bias: true}, c.rng)
	if err != nil && c.err == nil {
		c.err = fmt.Errorf("auxue model: conv %dx%d %d->%d: %w", kernel, kernel, in, out, err)
	}
	return l
}

func (m *Model) encoder(rng *rand.Rand) (*nn.Sequential, error) {
	c, w := m.Config, m.Config.EncoderWidth
	if c.Form == FormVector {
		return &nn.Sequential{Layers: []nn.Layer{nn.NewLinear(c.In, w, rng), &nn.ReLU{}}}, nil
	}
	cv := &convs{rng: rng}
	seq := &nn.Sequential{Layers: []nn.Layer{cv.conv(c.In, w, 3, 1), &nn.ReLU{}, cv.conv(w, w, 3, 2), &nn.ReLU{}}}
	return seq, cv.err
}

// Params lists every trainable parameter with its path, e.g. "epis_head.0.weight".
func (m *Model) Params() []NamedParam { return m.named }

// SetWorkers sets how many goroutines each convolution splits its passes
// across (nn.Conv2d.SetWorkers; n < 1: GOMAXPROCS). The outputs and
// gradients do not depend on it.
func (m *Model) SetWorkers(n int) {
	for _, s := range []*nn.Sequential{m.Encoder, m.EpisEncoder, m.AleaHead, m.EpisHead} {
		if s != nil {
			nn.SetWorkers(n, s)
		}
	}
}

// checkInput validates x against the form and returns N and HW.
func (m *Model) checkInput(x *tensor.Dense) (n, hw int, err error) {
	if x == nil {
		return 0, 0, fmt.Errorf("auxue model: nil input")
	}
	s := x.Shape()
	if m.Config.Form == FormVector {
		if len(s) != 2 || s[1] != m.Config.In {
			return 0, 0, fmt.Errorf("auxue model: input shape %v, want (N, %d)", s, m.Config.In)
		}
		return s[0], 1, nil
	}
	if len(s) != 4 || s[1] != m.Config.In {
		return 0, 0, fmt.Errorf("auxue model: input shape %v, want (N, %d, H, W)", s, m.Config.In)
	}
	return s[0], s[2] * s[3], nil
}

// Forward runs both heads and returns the raw aleatoric parameters (N, P, ...)
// and the DIDO logits (N, K, ...). The tensors are owned by the layers and
// overwritten by the next Forward.
func (m *Model) Forward(x *tensor.Dense, mode nn.Mode) (raw, logits *tensor.Dense, err error) {
	n, hw, err := m.checkInput(x)
	if err != nil {
		return nil, nil, err
	}
	if n == 0 {
		return nil, nil, fmt.Errorf("auxue model: empty batch")
	}
	for _, v := range nn.Data(x) {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, nil, fmt.Errorf("auxue model: input contains %v", v)
		}
	}
	f1, f2 := x, x
	if m.Encoder != nil {
		if f1, err = m.Encoder.Forward(x, mode); err != nil {
			return nil, nil, fmt.Errorf("encoder: %w", err)
		}
		f2 = f1
		if m.EpisEncoder != nil {
			if f2, err = m.EpisEncoder.Forward(x, mode); err != nil {
				return nil, nil, fmt.Errorf("epistemic encoder: %w", err)
			}
		}
	}
	if raw, err = m.AleaHead.Forward(f1, mode); err != nil {
		return nil, nil, fmt.Errorf("aleatoric head: %w", err)
	}
	if logits, err = m.EpisHead.Forward(f2, mode); err != nil {
		return nil, nil, fmt.Errorf("epistemic head: %w", err)
	}
	m.n, m.hw = n, hw
	return raw, logits, nil
}

// Backward propagates the loss gradients of the last Forward's outputs into
// the parameters' Grad (accumulating).
func (m *Model) Backward(dRaw, dLogits *tensor.Dense) error {
	d1, err := m.AleaHead.Backward(dRaw)
	if err != nil {
		return fmt.Errorf("aleatoric head backward: %w", err)
	}
	d2, err := m.EpisHead.Backward(dLogits)
	if err != nil {
		return fmt.Errorf("epistemic head backward: %w", err)
	}
	if m.Encoder == nil {
		return nil
	}
	if m.EpisEncoder != nil {
		if _, err := m.Encoder.Backward(d1); err != nil {
			return fmt.Errorf("encoder backward: %w", err)
		}
		if _, err := m.EpisEncoder.Backward(d2); err != nil {
			return fmt.Errorf("epistemic encoder backward: %w", err)
		}
		return nil
	}
	// Shared encoder: its output feeds both heads, so the gradients add.
	m.dShared = reuseLike(m.dShared, d1)
	sum, a, b := nn.Data(m.dShared), nn.Data(d1), nn.Data(d2)
	for i := range sum {
		sum[i] = a[i] + b[i]
	}
	if _, err := m.Encoder.Backward(m.dShared); err != nil {
		return fmt.Errorf("encoder backward: %w", err)
	}
	return nil
}

// reuseLike returns buf when it has t's shape, else a new tensor of that shape.
func reuseLike(buf, t *tensor.Dense) *tensor.Dense {
	if buf != nil && buf.Shape().Eq(t.Shape()) {
		return buf
	}
	return nn.NewDense(t.Shape()...)
}

// Losses holds the two parts of L_AuxUE = L(Theta1) + L(Theta2).
type Losses struct {
	Aleatoric, Epistemic float64
	Valid                int // elements in the aleatoric mean
	Binned               int // elements in the DIDO mean
}

// Total is L(Theta1) + L(Theta2).
func (l Losses) Total() float64 { return l.Aleatoric + l.Epistemic }

// Step runs Forward in Train mode on x, the two losses and Backward, adding
// the gradients to the parameters' Grad (call nn.ZeroGrad first). errs and
// valid are (N, HW) main-task errors and mask (valid may be nil), bins the
// (N, HW) DIDO targets from a Discretizer (-1: not in the loss).
func (m *Model) Step(x *tensor.Dense, errs []float32, valid []bool, bins []int32) (Losses, error) {
	return m.losses(x, errs, valid, bins, nn.Train, true)
}

// Evaluate computes the losses in Eval mode without gradients.
func (m *Model) Evaluate(x *tensor.Dense, errs []float32, valid []bool, bins []int32) (Losses, error) {
	return m.losses(x, errs, valid, bins, nn.Eval, false)
}

func (m *Model) losses(x *tensor.Dense, errs []float32, valid []bool, bins []int32, mode nn.Mode, backward bool) (Losses, error) {
	raw, logits, err := m.Forward(x, mode)
	if err != nil {
		return Losses{}, err
	}
	var gr, gl []float32
	if backward {
		m.dRaw, m.dLogits = reuseLike(m.dRaw, raw), reuseLike(m.dLogits, logits)
		gr, gl = nn.Data(m.dRaw), nn.Data(m.dLogits)
	}
	var l Losses
	if l.Aleatoric, l.Valid, err = m.Config.Aleatoric.Loss(nn.Data(raw), m.n, m.hw, errs, valid, gr); err != nil {
		return Losses{}, err
	}
	if l.Epistemic, l.Binned, err = m.DIDO.Loss(nn.Data(logits), m.n, m.hw, bins, gl); err != nil {
		return Losses{}, err
	}
	if backward {
		if err := m.Backward(m.dRaw, m.dLogits); err != nil {
			return Losses{}, err
		}
	}
	return l, nil
}

// Prediction holds per-element read-outs, each (N, HW).
type Prediction struct {
	Scale     []float32 // aleatoric scale (Laplace b; see AleatoricLoss.Scale)
	HalfWidth []float32 // interval half-width at the requested coverage
	Epistemic []float32 // DIDO K/S in (0, 1]
	Bin       []int32   // argmax DIDO class (rough aleatoric read-out)
}

// Predict runs the model in Eval mode and fills p (its slices are grown as
// needed and reused across calls). coverage is the interval's probability.
func (m *Model) Predict(x *tensor.Dense, coverage float64, p *Prediction) error {
	if !(coverage > 0 && coverage < 1) {
		return fmt.Errorf("auxue predict: interval coverage %v outside (0, 1)", coverage)
	}
	raw, logits, err := m.Forward(x, nn.Eval)
	if err != nil {
		return err
	}
	size := m.n * m.hw
	p.Scale, p.HalfWidth, p.Epistemic = growF(p.Scale, size), growF(p.HalfWidth, size), growF(p.Epistemic, size)
	if cap(p.Bin) < size {
		p.Bin = make([]int32, size)
	}
	p.Bin = p.Bin[:size]
	if err := m.DIDO.Epistemic(nn.Data(logits), m.n, m.hw, p.Epistemic, p.Bin); err != nil {
		return err
	}
	np := m.Config.Aleatoric.Kind.NumParams()
	var r [3]float32
	rd := nn.Data(raw)
	for b := 0; b < m.n; b++ {
		for j := 0; j < m.hw; j++ {
			for c := 0; c < np; c++ {
				r[c] = rd[(b*np+c)*m.hw+j]
			}
			hw, err := m.Config.Aleatoric.HalfWidth(r[:np], coverage)
			if err != nil {
				return err
			}
			p.Scale[b*m.hw+j] = float32(m.Config.Aleatoric.Scale(r[:np]))
			p.HalfWidth[b*m.hw+j] = float32(hw)
		}
	}
	return nil
}

func growF(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
