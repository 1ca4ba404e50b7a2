package nn

import (
	"fmt"
	"math/rand/v2"

	"gorgonia.org/tensor"
)

// Dropout zeroes each input with probability P and scales the survivors by
// 1/(1-P) (inverted dropout), in Train and MonteCarlo modes; in Eval it is the
// identity, so no rescaling is needed at inference.
type Dropout struct {
	P float32

	rng      *rand.Rand
	mask     []float32 // 0 or 1/(1-P) per element of the last Forward
	identity bool
	out, dx  *tensor.Dense
	have     bool
}

// NewDropout returns a dropout layer drawing its masks from rng (a nil rng
// uses a fixed seed).
func NewDropout(p float32, rng *rand.Rand) *Dropout {
	return &Dropout{P: p, rng: orDefault(rng)}
}

// Forward applies the mode's behaviour. The returned tensor is owned by the
// layer, also in Eval mode (it is a copy of x).
func (d *Dropout) Forward(x *tensor.Dense, mode Mode) (*tensor.Dense, error) {
	xs, err := checkInput(d, x, 1, 2, 3, 4, 5)
	if err != nil {
		return nil, err
	}
	if !(d.P >= 0 && d.P < 1) {
		return nil, fmt.Errorf("Dropout: probability %v outside [0, 1)", d.P)
	}
	if d.rng == nil {
		d.rng = orDefault(nil)
	}
	y := reuse(&d.out, x.Shape()...)
	ys := Data(y)
	d.have = true
	d.identity = mode == Eval || d.P == 0
	if d.identity {
		copy(ys, xs)
		return y, nil
	}
	mask := grow(&d.mask, len(xs))
	scale := 1 / (1 - d.P)
	for i, v := range xs {
		if d.rng.Float32() < d.P {
			mask[i] = 0
		} else {
			mask[i] = scale
		}
		ys[i] = v * mask[i]
	}
	return y, nil
}

// Backward applies the mask of the last Forward to dy.
func (d *Dropout) Backward(dy *tensor.Dense) (*tensor.Dense, error) {
	var shape tensor.Shape
	if d.out != nil {
		shape = d.out.Shape()
	}
	g, err := checkGrad(d, dy, shape, d.have)
	if err != nil {
		return nil, err
	}
	dx := reuse(&d.dx, shape...)
	dxs := Data(dx)
	if d.identity {
		copy(dxs, g)
		return dx, nil
	}
	for i, v := range g {
		dxs[i] = v * d.mask[i]
	}
	return dx, nil
}

// Params returns nil: dropout has no parameters.
func (d *Dropout) Params() []*Param { return nil }

func (d *Dropout) name() string { return fmt.Sprintf("Dropout(p=%g)", d.P) }
