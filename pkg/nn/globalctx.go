package nn

import (
	"fmt"

	"gorgonia.org/tensor"
)

// GlobalContext maps (N, C, H, W) to (N, C + C*B, H, W): the input followed
// by each image's channel means over B horizontal bands of equal height
// (B = Bands, 0 or 1 = the whole frame), repeated over H x W; channel
// C + c*B + b holds the mean of channel c over band b. It gives every pixel
// of a small convolutional head a view of the whole frame (an indoor room
// and an outdoor road differ globally more than in any 9 x 9 patch); the
// bands keep where in the frame things are (sky above, road below), which
// a whole-frame mean forgets. ONNX: Concat(x, Expand(Reshape(ReduceMean(
// Reshape(x, (N, C, B, -1)), axes = [3]), (N, C*B, 1, 1)), (1, 1, H, W))).
type GlobalContext struct {
	Bands int

	n, c, hw int
	h, w, b  int
	out, dx  *tensor.Dense
	have     bool
}

func (g *GlobalContext) name() string { return "GlobalContext" }

func (g *GlobalContext) bands() int { return max(g.Bands, 1) }

// OutChannels returns the output width for in input channels.
func (g *GlobalContext) OutChannels(in int) int { return in + in*g.bands() }

// Forward copies x and appends the broadcast band means. The returned
// tensor is owned by the layer.
func (g *GlobalContext) Forward(x *tensor.Dense, mode Mode) (*tensor.Dense, error) {
	xs, err := checkInput(g, x, 4)
	if err != nil {
		return nil, err
	}
	sh := x.Shape()
	nb := g.bands()
	if sh[2]%nb != 0 {
		return nil, fmt.Errorf("%s: height %d is not a multiple of %d bands", g.name(), sh[2], nb)
	}
	g.n, g.c, g.h, g.w, g.hw, g.b, g.have = sh[0], sh[1], sh[2], sh[3], sh[2]*sh[3], nb, true
	oc := g.OutChannels(g.c)
	y := reuse(&g.out, g.n, oc, g.h, g.w)
	ys := Data(y)
	band := g.hw / nb // elements of one band of one channel (rows are contiguous)
	for b := 0; b < g.n; b++ {
		in := xs[b*g.c*g.hw : (b+1)*g.c*g.hw]
		out := ys[b*oc*g.hw : (b+1)*oc*g.hw]
		copy(out, in)
		for ch := 0; ch < g.c; ch++ {
			for k := 0; k < nb; k++ {
				var sum float64 // float64: a band may hold tens of thousands of terms
				for _, v := range in[ch*g.hw+k*band : ch*g.hw+(k+1)*band] {
					sum += float64(v)
				}
				mean := float32(sum / float64(band))
				o := g.c + ch*nb + k
				dst := out[o*g.hw : (o+1)*g.hw]
				for i := range dst {
					dst[i] = mean
				}
			}
		}
	}
	return y, nil
}

// Backward passes the first C channels through and spreads the sum of each
// mean channel's gradient evenly over the inputs of its band.
func (g *GlobalContext) Backward(dy *tensor.Dense) (*tensor.Dense, error) {
	var shape tensor.Shape
	if g.out != nil {
		shape = g.out.Shape()
	}
	ds, err := checkGrad(g, dy, shape, g.have)
	if err != nil {
		return nil, err
	}
	oc, nb := g.OutChannels(g.c), g.b
	band := g.hw / nb
	dx := reuse(&g.dx, g.n, g.c, g.h, g.w)
	dxs := Data(dx)
	for b := 0; b < g.n; b++ {
		grad := ds[b*oc*g.hw : (b+1)*oc*g.hw]
		dst := dxs[b*g.c*g.hw : (b+1)*g.c*g.hw]
		copy(dst, grad[:g.c*g.hw])
		for ch := 0; ch < g.c; ch++ {
			for k := 0; k < nb; k++ {
				o := g.c + ch*nb + k
				var sum float64
				for _, v := range grad[o*g.hw : (o+1)*g.hw] {
					sum += float64(v)
				}
				share := float32(sum / float64(band))
				out := dst[ch*g.hw+k*band : ch*g.hw+(k+1)*band]
				for i := range out {
					out[i] += share
				}
			}
		}
	}
	return dx, nil
}

// Params returns nil: GlobalContext has no parameters.
func (g *GlobalContext) Params() []*Param { return nil }
