package nn

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"
)

// Optimizer updates parameters from their accumulated gradients.
type Optimizer interface {
	// Step applies one update with learning rate lr.
	Step(lr float64) error
}

// AdamConfig holds Adam's hyperparameters. Zero Beta1, Beta2 or Eps take the
// defaults 0.9, 0.999 and 1e-8 (Kingma & Ba 2015).
type AdamConfig struct {
	Beta1, Beta2, Eps float64
	// WeightDecay adds WeightDecay·θ to the gradient (L2 penalty), or with
	// Decoupled multiplies θ by (1 − lr·WeightDecay) before the Adam step
	// (AdamW, Loshchilov & Hutter 2019; PyTorch's convention).
	WeightDecay float64
	Decoupled   bool
}

// Adam is the Adam / AdamW optimizer.
type Adam struct {
	cfg    AdamConfig
	params []*Param
	m, v   [][]float32
	t      int
}

// NewAdam returns an Adam optimizer over params with zeroed moments.
func NewAdam(params []*Param, cfg AdamConfig) *Adam {
	if cfg.Beta1 == 0 {
		cfg.Beta1 = 0.9
	}
	if cfg.Beta2 == 0 {
		cfg.Beta2 = 0.999
	}
	if cfg.Eps == 0 {
		cfg.Eps = 1e-8
	}
	a := &Adam{cfg: cfg, params: params, m: make([][]float32, len(params)), v: make([][]float32, len(params))}
	for i, p := range params {
		if n := len(Data(p.Value)); n > 0 {
			a.m[i], a.v[i] = make([]float32, n), make([]float32, n)
		}
	}
	return a
}

// Config returns the configuration in effect (defaults filled in).
func (a *Adam) Config() AdamConfig { return a.cfg }

// Steps returns the number of steps taken.
func (a *Adam) Steps() int { return a.t }

// Step applies one Adam update:
//
//	m ← β1 m + (1−β1) g,  v ← β2 v + (1−β2) g²,
//	θ ← θ − lr · (m / (1−β1ᵗ)) / (sqrt(v / (1−β2ᵗ)) + ε).
func (a *Adam) Step(lr float64) error {
	c := a.cfg
	if !(c.Beta1 >= 0 && c.Beta1 < 1 && c.Beta2 >= 0 && c.Beta2 < 1 && c.Eps > 0 && c.WeightDecay >= 0) {
		return fmt.Errorf("adam: invalid config %+v", c)
	}
	if math.IsNaN(lr) || lr < 0 {
		return fmt.Errorf("adam: invalid learning rate %v", lr)
	}
	for i, p := range a.params {
		w, g := Data(p.Value), Data(p.Grad)
		if len(w) != len(g) || len(w) != len(a.m[i]) {
			return fmt.Errorf("adam: parameter %d %q: value has %d elements, gradient %d, optimizer state %d",
				i, p.Name, len(w), len(g), len(a.m[i]))
		}
	}
	a.t++
	bc1 := 1 - math.Pow(c.Beta1, float64(a.t))
	bc2 := 1 - math.Pow(c.Beta2, float64(a.t))
	b1, b2 := float32(c.Beta1), float32(c.Beta2)
	stepSize := lr / bc1
	sqrtBC2 := math.Sqrt(bc2)
	for i, p := range a.params {
		w, g, m, v := Data(p.Value), Data(p.Grad), a.m[i], a.v[i]
		decay := float32(1 - lr*c.WeightDecay)
		l2 := float32(c.WeightDecay)
		for j := range w {
			gj := g[j]
			if c.Decoupled {
				w[j] *= decay
			} else {
				gj += l2 * w[j]
			}
			m[j] = b1*m[j] + (1-b1)*gj
			v[j] = b2*v[j] + (1-b2)*gj*gj
			denom := math.Sqrt(float64(v[j]))/sqrtBC2 + c.Eps
			w[j] -= float32(stepSize * float64(m[j]) / denom)
		}
	}
	return nil
}

// ZeroGrad clears the accumulated gradients.
func ZeroGrad(params []*Param) {
	for _, p := range params {
		clear32(Data(p.Grad))
	}
}

// PolyDecay is the polynomial learning-rate schedule of BTS (Lee et al. 2019)
// used by the paper's depth experiments:
//
//	lr = (base − end) · (1 − step/total)^power + end,
//
// with step clamped to [0, total]; total ≤ 0 gives end.
func PolyDecay(base, end float64, step, total int, power float64) float64 {
	if total <= 0 {
		return end
	}
	step = min(max(step, 0), total)
	return (base-end)*math.Pow(1-float64(step)/float64(total), power) + end
}

// StateParams returns Adam's moments as parameters named "adam.m." and
// "adam.v." followed by each parameter's name, sharing the optimizer's
// memory (shapes as the parameters'), so that a checkpoint holds them
// (SaveCheckpoint) and a resumed run loads them back (LoadCheckpoint);
// with SetSteps the resumed run continues exactly.
func (a *Adam) StateParams() []*Param {
	out := make([]*Param, 0, 2*len(a.params))
	for i, p := range a.params {
		shape := p.Value.Shape().Clone()
		for _, s := range []struct {
			prefix string
			data   []float32
		}{{"adam.m.", a.m[i]}, {"adam.v.", a.v[i]}} {
			out = append(out, &Param{Name: s.prefix + p.Name,
				Value: tensor.New(tensor.WithShape(shape...), tensor.WithBacking(s.data))})
		}
	}
	return out
}

// SetSteps sets the number of steps taken (the bias correction) of a
// resumed run.
func (a *Adam) SetSteps(t int) { a.t = t }
