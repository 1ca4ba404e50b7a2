package nn

import (
	"fmt"

	"gorgonia.org/tensor"
)

// Concat joins tensors along axis 1 (channels of NCHW, features of (N, F)).
// It is not a Layer because it has several inputs.
type Concat struct {
	sizes   []int // axis-1 size of each input in the last Forward
	inner   int   // elements per axis-1 slot (H·W for images, 1 for vectors)
	n       int
	out     *tensor.Dense
	grads   []*tensor.Dense
	have    bool
	outSize int
}

// Forward concatenates xs, which must agree in every dimension but axis 1.
// The returned tensor is owned by Concat and overwritten by the next Forward.
func (c *Concat) Forward(xs []*tensor.Dense) (*tensor.Dense, error) {
	if len(xs) == 0 {
		return nil, fmt.Errorf("Concat: no inputs")
	}
	if _, err := checkInput(c, xs[0], 2, 3, 4, 5); err != nil {
		return nil, fmt.Errorf("input 0: %w", err)
	}
	ref := xs[0].Shape()
	c.sizes = c.sizes[:0]
	total := 0
	for i, x := range xs {
		if _, err := checkInput(c, x, len(ref)); err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		sh := x.Shape()
		for d := range sh {
			if d != 1 && sh[d] != ref[d] {
				return nil, fmt.Errorf("Concat: input %d shape %v does not match input 0 shape %v outside axis 1", i, sh, ref)
			}
		}
		c.sizes = append(c.sizes, sh[1])
		total += sh[1]
	}
	c.n, c.inner, c.outSize = ref[0], 1, total
	for _, s := range ref[2:] {
		c.inner *= s
	}
	var y *tensor.Dense
	switch len(ref) {
	case 2:
		y = reuse(&c.out, ref[0], total)
	case 3:
		y = reuse(&c.out, ref[0], total, ref[2])
	case 4:
		y = reuse(&c.out, ref[0], total, ref[2], ref[3])
	default:
		y = reuse(&c.out, ref[0], total, ref[2], ref[3], ref[4])
	}
	ys := Data(y)
	off := 0
	for i, x := range xs {
		blk := c.sizes[i] * c.inner
		src := Data(x)
		for n := 0; n < c.n; n++ {
			copy(ys[(n*total*c.inner)+off:], src[n*blk:(n+1)*blk])
		}
		off += blk
	}
	c.have = true
	return y, nil
}

// Backward splits dy into the gradients of the inputs of the last Forward.
// The returned tensors are owned by Concat.
func (c *Concat) Backward(dy *tensor.Dense) ([]*tensor.Dense, error) {
	var shape tensor.Shape
	if c.out != nil {
		shape = c.out.Shape()
	}
	g, err := checkGrad(c, dy, shape, c.have)
	if err != nil {
		return nil, err
	}
	for len(c.grads) < len(c.sizes) {
		c.grads = append(c.grads, nil)
	}
	c.grads = c.grads[:len(c.sizes)]
	off := 0
	for i, s := range c.sizes {
		if !c.gradFits(i, shape, s) {
			sh := append(tensor.Shape(nil), shape...)
			sh[1] = s
			c.grads[i] = NewDense(sh...)
		}
		dst := Data(c.grads[i])
		blk := s * c.inner
		for n := 0; n < c.n; n++ {
			copy(dst[n*blk:(n+1)*blk], g[n*c.outSize*c.inner+off:])
		}
		off += blk
	}
	return c.grads, nil
}

func (c *Concat) name() string { return "Concat" }

// gradFits reports whether the cached gradient i has shape out with axis 1 = s.
func (c *Concat) gradFits(i int, out tensor.Shape, s int) bool {
	if c.grads[i] == nil {
		return false
	}
	sh := c.grads[i].Shape()
	if len(sh) != len(out) {
		return false
	}
	for d := range sh {
		if (d == 1 && sh[d] != s) || (d != 1 && sh[d] != out[d]) {
			return false
		}
	}
	return true
}
