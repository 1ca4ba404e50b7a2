package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gorgonia.org/tensor"
)

// DefaultCosineEps keeps the cosine-similarity denominator away from zero.
const DefaultCosineEps = 1e-8

// CosineSimilarity is the cosine-similarity layer of the DIDO head (paper,
// supplementary A.1.2): a bias-free linear map whose outputs are divided by the
// norms of the input and of each weight row,
//
//	y_o = (w_o · x) / (‖w_o‖ ‖x‖ + Eps).
//
// It accepts (N, In) vectors, or (N, In, H, W) feature maps where it acts per
// pixel like a 1x1 convolution. Weight has shape (Out, In).
type CosineSimilarity struct {
	In, Out int
	Weight  *Param
	Eps     float32

	x          []float32
	n, pixels  int // batch size and pixels per image (1 for vectors)
	rank       int
	wNorm      []float32 // ‖w_o‖, per output
	xNorm      []float32 // ‖x‖ per (image, pixel)
	dot        []float32 // w_o · x, output layout
	gBuf, hBuf []float32 // backward scratch, output layout
	colSum     []float32
	out, dx    *tensor.Dense
	have       bool
	gs         gemmScratch
}

// NewCosineSimilarity returns the layer with Kaiming-uniform weights drawn from
// rng (the scale does not matter for the output, only for the step size of
// the optimizer) and Eps = DefaultCosineEps. A nil rng uses a fixed seed.
func NewCosineSimilarity(in, out int, rng *rand.Rand) *CosineSimilarity {
	c := &CosineSimilarity{In: in, Out: out, Weight: newParam("weight", out, in), Eps: DefaultCosineEps}
	kaimingUniform(Data(c.Weight.Value), in, orDefault(rng))
	return c
}

func (c *CosineSimilarity) name() string { return fmt.Sprintf("CosineSimilarity(%d->%d)", c.In, c.Out) }

func grow(buf *[]float32, n int) []float32 {
	if cap(*buf) < n {
		*buf = make([]float32, n)
	}
	*buf = (*buf)[:n]
	return *buf
}

// Forward computes the cosine similarities. The returned tensor is owned by
// the layer and overwritten by the next Forward.
func (c *CosineSimilarity) Forward(x *tensor.Dense, mode Mode) (*tensor.Dense, error) {
	xs, err := checkInput(c, x, 2, 4)
	if err != nil {
		return nil, err
	}
	sh := x.Shape()
	if sh[1] != c.In {
		return nil, fmt.Errorf("%s: input shape %v has %d features/channels, want %d", c.name(), sh, sh[1], c.In)
	}
	if err := checkParam(c, c.Weight, c.Out, c.In); err != nil {
		return nil, err
	}
	n, pixels := sh[0], 1
	var y *tensor.Dense
	if len(sh) == 4 {
		pixels = sh[2] * sh[3]
		y = reuse(&c.out, n, c.Out, sh[2], sh[3])
	} else {
		y = reuse(&c.out, n, c.Out)
	}
	c.x, c.n, c.pixels, c.rank, c.have = xs, n, pixels, len(sh), true
	w := Data(c.Weight.Value)
	wn := grow(&c.wNorm, c.Out)
	for o := range wn {
		var s float64
		for _, v := range w[o*c.In : (o+1)*c.In] {
			s += float64(v) * float64(v)
		}
		wn[o] = float32(math.Sqrt(s))
	}
	xn := grow(&c.xNorm, n*pixels)
	clear32(xn)
	dot := grow(&c.dot, n*c.Out*pixels)
	if len(sh) == 2 {
		for i := 0; i < n; i++ {
			var s float64
			for _, v := range xs[i*c.In : (i+1)*c.In] {
				s += float64(v) * float64(v)
			}
			xn[i] = float32(math.Sqrt(s))
		}
		gemm(&c.gs, false, true, n, c.Out, c.In, xs, c.In, w, c.In, dot, c.Out, false)
	} else {
		for i := 0; i < n; i++ {
			xi, xni := xs[i*c.In*pixels:(i+1)*c.In*pixels], xn[i*pixels:(i+1)*pixels]
			for ch := 0; ch < c.In; ch++ {
				for p, v := range xi[ch*pixels : (ch+1)*pixels] {
					xni[p] += v * v
				}
			}
			for p, v := range xni {
				xni[p] = float32(math.Sqrt(float64(v)))
			}
			gemm(&c.gs, false, false, c.Out, pixels, c.In, w, c.In, xi, pixels, dot[i*c.Out*pixels:], pixels, false)
		}
	}
	ys := Data(y)
	c.each(func(k, o, p int) { ys[k] = dot[k] / (wn[o]*xn[p] + c.Eps) })
	return y, nil
}

// each visits every output element: its flat index k, output unit o and the
// flat (image, pixel) index p of the input vector it came from.
func (c *CosineSimilarity) each(f func(k, o, p int)) {
	if c.rank == 2 {
		for i := 0; i < c.n; i++ {
			for o := 0; o < c.Out; o++ {
				f(i*c.Out+o, o, i)
			}
		}
		return
	}
	for i := 0; i < c.n; i++ {
		for o := 0; o < c.Out; o++ {
			base := (i*c.Out + o) * c.pixels
			for p := 0; p < c.pixels; p++ {
				f(base+p, o, i*c.pixels+p)
			}
		}
	}
}

// Backward accumulates the weight gradient and returns the input gradient.
// With D = ‖w‖‖x‖ + eps and d = w·x:
//
//	∂y/∂x = w/D − d ‖w‖ x / (D² ‖x‖),  ∂y/∂w = x/D − d ‖x‖ w / (D² ‖w‖).
func (c *CosineSimilarity) Backward(dy *tensor.Dense) (*tensor.Dense, error) {
	var shape tensor.Shape
	if c.out != nil {
		shape = c.out.Shape()
	}
	g, err := checkGrad(c, dy, shape, c.have)
	if err != nil {
		return nil, err
	}
	wn, xn, dot := c.wNorm, c.xNorm, c.dot
	G := grow(&c.gBuf, len(g)) // dy / D
	H := grow(&c.hBuf, len(g)) // dy d / D²
	c.each(func(k, o, p int) {
		d := wn[o]*xn[p] + c.Eps
		G[k] = g[k] / d
		H[k] = g[k] * dot[k] / (d * d)
	})
	// xCoef[p] = Σ_o H ‖w_o‖ / ‖x_p‖ ; wCoef[o] = Σ_p H ‖x_p‖ / ‖w_o‖.
	xCoef := grow(&c.colSum, c.n*c.pixels+c.Out)
	wCoef := xCoef[c.n*c.pixels:]
	xCoef = xCoef[:c.n*c.pixels]
	clear32(xCoef)
	clear32(wCoef)
	c.each(func(k, o, p int) {
		xCoef[p] += H[k] * wn[o]
		wCoef[o] += H[k] * xn[p]
	})
	for p, v := range xn {
		if v > 0 {
			xCoef[p] /= v
		} else {
			xCoef[p] = 0 // x = 0: the term is x·(…) = 0
		}
	}
	for o, v := range wn {
		if v > 0 {
			wCoef[o] /= v
		} else {
			wCoef[o] = 0
		}
	}
	w, dw, xs := Data(c.Weight.Value), Data(c.Weight.Grad), c.x
	var dx *tensor.Dense
	if c.rank == 2 {
		dx = reuse(&c.dx, c.n, c.In)
		dxs := Data(dx)
		gemm(&c.gs, false, false, c.n, c.In, c.Out, G, c.Out, w, c.In, dxs, c.In, false)
		for i := 0; i < c.n; i++ {
			for j := 0; j < c.In; j++ {
				dxs[i*c.In+j] -= xCoef[i] * xs[i*c.In+j]
			}
		}
		gemm(&c.gs, true, false, c.Out, c.In, c.n, G, c.Out, xs, c.In, dw, c.In, true)
	} else {
		sh := c.out.Shape()
		dx = reuse(&c.dx, c.n, c.In, sh[2], sh[3])
		dxs := Data(dx)
		P := c.pixels
		for i := 0; i < c.n; i++ {
			gi, xi, dxi := G[i*c.Out*P:(i+1)*c.Out*P], xs[i*c.In*P:(i+1)*c.In*P], dxs[i*c.In*P:(i+1)*c.In*P]
			gemm(&c.gs, true, false, c.In, P, c.Out, w, c.In, gi, P, dxi, P, false)
			xc := xCoef[i*P : (i+1)*P]
			for ch := 0; ch < c.In; ch++ {
				row, xrow := dxi[ch*P:(ch+1)*P], xi[ch*P:(ch+1)*P]
				for p := range row {
					row[p] -= xc[p] * xrow[p]
				}
			}
			gemm(&c.gs, false, true, c.Out, c.In, P, gi, P, xi, P, dw, c.In, true)
		}
	}
	for o := 0; o < c.Out; o++ {
		for j := 0; j < c.In; j++ {
			dw[o*c.In+j] -= wCoef[o] * w[o*c.In+j]
		}
	}
	return dx, nil
}

// Params returns the weight.
func (c *CosineSimilarity) Params() []*Param { return []*Param{c.Weight} }
