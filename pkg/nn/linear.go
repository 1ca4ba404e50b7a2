package nn

import (
	"fmt"
	"math/rand/v2"

	"gorgonia.org/tensor"
)

// Linear is a fully connected layer y = x Wᵀ + b on (N, In) inputs.
// Weight has shape (Out, In) and Bias (Out), as in PyTorch and ONNX Gemm
// with transB = 1.
type Linear struct {
	In, Out      int
	Weight, Bias *Param

	x    []float32 // input of the last Forward (not copied; must stay unchanged until Backward)
	n    int
	out  *tensor.Dense
	dx   *tensor.Dense
	have bool
	gs   gemmScratch
}

// NewLinear returns a Linear layer with Kaiming-uniform weights drawn from rng
// (fan-in In) and zero bias. A nil rng uses a fixed seed.
func NewLinear(in, out int, rng *rand.Rand) *Linear {
	l := &Linear{In: in, Out: out, Weight: newParam("weight", out, in), Bias: newParam("bias", out)}
	kaimingUniform(Data(l.Weight.Value), in, orDefault(rng))
	return l
}

func (l *Linear) name() string { return fmt.Sprintf("Linear(%d->%d)", l.In, l.Out) }

// Forward computes x Wᵀ + b. The returned tensor is owned by the layer and
// overwritten by the next Forward.
func (l *Linear) Forward(x *tensor.Dense, mode Mode) (*tensor.Dense, error) {
	xs, err := checkInput(l, x, 2)
	if err != nil {
		return nil, err
	}
	if x.Shape()[1] != l.In {
		return nil, fmt.Errorf("%s: input shape %v, want (N, %d)", l.name(), x.Shape(), l.In)
	}
	if err := checkParam(l, l.Weight, l.Out, l.In); err != nil {
		return nil, err
	}
	if err := checkParam(l, l.Bias, l.Out); err != nil {
		return nil, err
	}
	n := x.Shape()[0]
	y := reuse(&l.out, n, l.Out)
	ys := Data(y)
	b := Data(l.Bias.Value)
	for i := 0; i < n; i++ {
		copy(ys[i*l.Out:(i+1)*l.Out], b)
	}
	gemm(&l.gs, false, true, n, l.Out, l.In, xs, l.In, Data(l.Weight.Value), l.In, ys, l.Out, true)
	l.x, l.n, l.have = xs, n, true
	return y, nil
}

// Backward accumulates dW += dyᵀ x and db += Σ dy and returns dy W.
func (l *Linear) Backward(dy *tensor.Dense) (*tensor.Dense, error) {
	var shape tensor.Shape
	if l.out != nil {
		shape = l.out.Shape()
	}
	g, err := checkGrad(l, dy, shape, l.have)
	if err != nil {
		return nil, err
	}
	gemm(&l.gs, true, false, l.Out, l.In, l.n, g, l.Out, l.x, l.In, Data(l.Weight.Grad), l.In, true)
	db := Data(l.Bias.Grad)
	for i := 0; i < l.n; i++ {
		row := g[i*l.Out : (i+1)*l.Out]
		for o, v := range row {
			db[o] += v
		}
	}
	dx := reuse(&l.dx, l.n, l.In)
	gemm(&l.gs, false, false, l.n, l.In, l.Out, g, l.Out, Data(l.Weight.Value), l.In, Data(dx), l.In, false)
	return dx, nil
}

// Params returns the weight and the bias.
func (l *Linear) Params() []*Param { return []*Param{l.Weight, l.Bias} }
