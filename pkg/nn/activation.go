package nn

import (
	"math"

	"gorgonia.org/tensor"
)

// elementwise holds the buffers shared by the parameter-free pointwise layers.
type elementwise struct {
	x    []float32 // input of the last Forward (referenced, not copied)
	out  *tensor.Dense
	dx   *tensor.Dense
	have bool
}

func (e *elementwise) forward(layer named, x *tensor.Dense) (xs, ys []float32, y *tensor.Dense, err error) {
	xs, err = checkInput(layer, x, 1, 2, 3, 4, 5)
	if err != nil {
		return nil, nil, nil, err
	}
	y = reuse(&e.out, x.Shape()...)
	e.x, e.have = xs, true
	return xs, Data(y), y, nil
}

func (e *elementwise) backward(layer named, dy *tensor.Dense) (g, dxs []float32, dx *tensor.Dense, err error) {
	var shape tensor.Shape
	if e.out != nil {
		shape = e.out.Shape()
	}
	g, err = checkGrad(layer, dy, shape, e.have)
	if err != nil {
		return nil, nil, nil, err
	}
	dx = reuse(&e.dx, shape...)
	return g, Data(dx), dx, nil
}

// ReLU is max(x, 0); its gradient at 0 is taken as 0.
type ReLU struct{ elementwise }

// Forward applies max(x, 0). The returned tensor is owned by the layer.
func (r *ReLU) Forward(x *tensor.Dense, mode Mode) (*tensor.Dense, error) {
	xs, ys, y, err := r.forward(r, x)
	if err != nil {
		return nil, err
	}
	reluCopy(false, ys, xs)
	return y, nil
}

// skip marks a Forward that a Conv2d computed in its place (Sequential's
// fusion): the layer holds no input or output of it, and a Backward
// reports that it had no Forward.
func (r *ReLU) skip() { r.x, r.have = nil, false }

// Backward passes dy where the input was positive.
func (r *ReLU) Backward(dy *tensor.Dense) (*tensor.Dense, error) {
	g, dxs, dx, err := r.backward(r, dy)
	if err != nil {
		return nil, err
	}
	ys := Data(r.out)
	ys = ys[:len(g)]
	dxs = dxs[:len(g)]
	for i, v := range g {
		// Without a branch (the sign of a ReLU output is a coin flip for the
		// branch predictor): y > 0, NaN excluded, exactly when its bits lie in
		// [1, 0x7f800000]; the select compiles to a conditional move.
		mask := uint32(0)
		if math.Float32bits(ys[i])-1 < 0x7f800000 {
			mask = ^uint32(0)
		}
		dxs[i] = math.Float32frombits(math.Float32bits(v) & mask)
	}
	return dx, nil
}

// Params returns nil: ReLU has no parameters.
func (r *ReLU) Params() []*Param { return nil }

// DefaultExpClamp is the input bound of Exp. exp overflows float32 above
// ln(MaxFloat32) ≈ 88.72; exp(80) ≈ 5.5e34 leaves headroom for the sums that
// follow (the DIDO Dirichlet strength S adds K evidences).
const DefaultExpClamp = 80

// Exp is exp(min(x, Clamp)), the evidence activation of the DIDO head. The
// gradient is 0 where the input was clamped. Clamp 0 means DefaultExpClamp.
type Exp struct {
	Clamp float32
	elementwise
}

// NewExp returns an Exp layer clamped at DefaultExpClamp.
func NewExp() *Exp { return &Exp{Clamp: DefaultExpClamp} }

func (e *Exp) bound() float32 {
	if e.Clamp == 0 {
		return DefaultExpClamp
	}
	return e.Clamp
}

// Forward applies exp(min(x, Clamp)). The returned tensor is owned by the layer.
func (e *Exp) Forward(x *tensor.Dense, mode Mode) (*tensor.Dense, error) {
	xs, ys, y, err := e.forward(e, x)
	if err != nil {
		return nil, err
	}
	c := e.bound()
	for i, v := range xs {
		ys[i] = float32(math.Exp(float64(min(v, c))))
	}
	return y, nil
}

// Backward returns dy * exp(x) below the clamp and 0 at or above it.
func (e *Exp) Backward(dy *tensor.Dense) (*tensor.Dense, error) {
	g, dxs, dx, err := e.backward(e, dy)
	if err != nil {
		return nil, err
	}
	ys, c := Data(e.out), e.bound()
	for i, v := range g {
		if e.x[i] < c {
			dxs[i] = v * ys[i]
		} else {
			dxs[i] = 0
		}
	}
	return dx, nil
}

// Params returns nil: Exp has no parameters.
func (e *Exp) Params() []*Param { return nil }

// Softplus is log(1 + exp(x)), computed as max(x, 0) + log1p(exp(-|x|)) so
// that it neither overflows for large x nor loses precision for very negative x.
type Softplus struct{ elementwise }

// Forward applies softplus. The returned tensor is owned by the layer.
func (s *Softplus) Forward(x *tensor.Dense, mode Mode) (*tensor.Dense, error) {
	xs, ys, y, err := s.forward(s, x)
	if err != nil {
		return nil, err
	}
	for i, v := range xs {
		f := float64(v)
		ys[i] = float32(max(f, 0) + math.Log1p(math.Exp(-math.Abs(f))))
	}
	return y, nil
}

// Backward returns dy * sigmoid(x), evaluated without overflow.
func (s *Softplus) Backward(dy *tensor.Dense) (*tensor.Dense, error) {
	g, dxs, dx, err := s.backward(s, dy)
	if err != nil {
		return nil, err
	}
	for i, v := range g {
		dxs[i] = v * float32(sigmoid(float64(s.x[i])))
	}
	return dx, nil
}

// Params returns nil: Softplus has no parameters.
func (s *Softplus) Params() []*Param { return nil }

func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

func (r *ReLU) name() string     { return "ReLU" }
func (e *Exp) name() string      { return "Exp" }
func (s *Softplus) name() string { return "Softplus" }
