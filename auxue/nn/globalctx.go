package nn

import "gorgonia.org/tensor"

// GlobalContext maps (N, C, H, W) to (N, 2C, H, W): the input followed by
// each image's channel means repeated over H x W. It gives every pixel of a
// small convolutional head a view of the whole frame (an indoor room and an
// outdoor road differ globally more than in any 9 x 9 patch). ONNX:
// Concat(x, Expand(ReduceMean(x, axes = [2, 3]), Shape(x)), axis = 1).
type GlobalContext struct {
	n, c, hw int
	h, w     int
	out, dx  *tensor.Dense
	have     bool
}

func (g *GlobalContext) name() string { return "GlobalContext" }

// Forward copies x and appends the broadcast means. The returned tensor is
// owned by the layer.
func (g *GlobalContext) Forward(x *tensor.Dense, mode Mode) (*tensor.Dense, error) {
	xs, err := checkInput(g, x, 4)
	if err != nil {
		return nil, err
	}
	sh := x.Shape()
	g.n, g.c, g.h, g.w, g.hw, g.have = sh[0], sh[1], sh[2], sh[3], sh[2]*sh[3], true
	y := reuse(&g.out, g.n, 2*g.c, g.h, g.w)
	ys := Data(y)
	for b := 0; b < g.n; b++ {
		in := xs[b*g.c*g.hw : (b+1)*g.c*g.hw]
		out := ys[b*2*g.c*g.hw : (b+1)*2*g.c*g.hw]
		copy(out, in)
		for ch := 0; ch < g.c; ch++ {
			var sum float64 // float64: H x W may be tens of thousands of terms
			for _, v := range in[ch*g.hw : (ch+1)*g.hw] {
				sum += float64(v)
			}
			mean := float32(sum / float64(g.hw))
			dst := out[(g.c+ch)*g.hw : (g.c+ch+1)*g.hw]
			for i := range dst {
				dst[i] = mean
			}
		}
	}
	return y, nil
}

// Backward passes the first C channels through and spreads the sum of each
// mean channel's gradient evenly over its H x W inputs.
func (g *GlobalContext) Backward(dy *tensor.Dense) (*tensor.Dense, error) {
	var shape tensor.Shape
	if g.out != nil {
		shape = g.out.Shape()
	}
	ds, err := checkGrad(g, dy, shape, g.have)
	if err != nil {
		return nil, err
	}
	dx := reuse(&g.dx, g.n, g.c, g.h, g.w)
	dxs := Data(dx)
	for b := 0; b < g.n; b++ {
		grad := ds[b*2*g.c*g.hw : (b+1)*2*g.c*g.hw]
		dst := dxs[b*g.c*g.hw : (b+1)*g.c*g.hw]
		for ch := 0; ch < g.c; ch++ {
			var sum float64
			for _, v := range grad[(g.c+ch)*g.hw : (g.c+ch+1)*g.hw] {
				sum += float64(v)
			}
			share := float32(sum / float64(g.hw))
			pass := grad[ch*g.hw : (ch+1)*g.hw]
			out := dst[ch*g.hw : (ch+1)*g.hw]
			for i, v := range pass {
				out[i] = v + share
			}
		}
	}
	return dx, nil
}

// Params returns nil: GlobalContext has no parameters.
func (g *GlobalContext) Params() []*Param { return nil }
