package nn

import (
	"fmt"

	"gorgonia.org/tensor"
)

// Upsample enlarges (N, C, H, W) to (N, C, H·Factor, W·Factor) by bilinear
// interpolation with align_corners = false: output pixel i samples the input
// at src = (i + 0.5)/Factor − 0.5, clamped to [0, size−1] at the borders. This
// is PyTorch's nn.Upsample(mode="bilinear", align_corners=False) and ONNX
// Resize(mode="linear", coordinate_transformation_mode="half_pixel").
type Upsample struct {
	Factor int

	n, c, h, w int
	// Per output row / column: the two source indices and the weight of the second.
	rowLo, rowHi, colLo, colHi []int
	rowWt, colWt               []float32
	tabH, tabW, tabF           int
	out, dx                    *tensor.Dense
	have                       bool
}

func (u *Upsample) name() string { return fmt.Sprintf("Upsample(x%d)", u.Factor) }

// halfPixelTable fills the source indices and weights for one axis.
func halfPixelTable(size, f int, lo, hi *[]int, wt *[]float32) {
	n := size * f
	*lo, *hi, *wt = make([]int, n), make([]int, n), make([]float32, n)
	for i := 0; i < n; i++ {
		src := (float64(i)+0.5)/float64(f) - 0.5
		if src < 0 {
			src = 0
		}
		i0 := int(src)
		if i0 > size-1 {
			i0 = size - 1
		}
		i1 := min(i0+1, size-1)
		(*lo)[i], (*hi)[i], (*wt)[i] = i0, i1, float32(src-float64(i0))
	}
}

// Forward interpolates. The returned tensor is owned by the layer.
func (u *Upsample) Forward(x *tensor.Dense, mode Mode) (*tensor.Dense, error) {
	xs, err := checkInput(u, x, 4)
	if err != nil {
		return nil, err
	}
	if u.Factor < 1 {
		return nil, fmt.Errorf("%s: factor must be at least 1", u.name())
	}
	sh := x.Shape()
	u.n, u.c, u.h, u.w, u.have = sh[0], sh[1], sh[2], sh[3], true
	f := u.Factor
	if u.tabH != u.h || u.tabW != u.w || u.tabF != f {
		halfPixelTable(u.h, f, &u.rowLo, &u.rowHi, &u.rowWt)
		halfPixelTable(u.w, f, &u.colLo, &u.colHi, &u.colWt)
		u.tabH, u.tabW, u.tabF = u.h, u.w, f
	}
	H, W := u.h*f, u.w*f
	y := reuse(&u.out, u.n, u.c, H, W)
	ys := Data(y)
	for p := 0; p < u.n*u.c; p++ {
		src, dst := xs[p*u.h*u.w:(p+1)*u.h*u.w], ys[p*H*W:(p+1)*H*W]
		for i := 0; i < H; i++ {
			r0, r1 := src[u.rowLo[i]*u.w:], src[u.rowHi[i]*u.w:]
			a := u.rowWt[i]
			out := dst[i*W : (i+1)*W]
			for j := range out {
				l, h, b := u.colLo[j], u.colHi[j], u.colWt[j]
				top := r0[l] + b*(r0[h]-r0[l])
				bot := r1[l] + b*(r1[h]-r1[l])
				out[j] = top + a*(bot-top)
			}
		}
	}
	return y, nil
}

// Backward distributes each output gradient to its four source pixels with the
// interpolation weights.
func (u *Upsample) Backward(dy *tensor.Dense) (*tensor.Dense, error) {
	var shape tensor.Shape
	if u.out != nil {
		shape = u.out.Shape()
	}
	g, err := checkGrad(u, dy, shape, u.have)
	if err != nil {
		return nil, err
	}
	f := u.tabF
	H, W := u.h*f, u.w*f
	dx := reuse(&u.dx, u.n, u.c, u.h, u.w)
	dxs := Data(dx)
	clear32(dxs)
	for p := 0; p < u.n*u.c; p++ {
		src, dst := g[p*H*W:(p+1)*H*W], dxs[p*u.h*u.w:(p+1)*u.h*u.w]
		for i := 0; i < H; i++ {
			r0, r1 := dst[u.rowLo[i]*u.w:], dst[u.rowHi[i]*u.w:]
			a := u.rowWt[i]
			in := src[i*W : (i+1)*W]
			for j, v := range in {
				l, h, b := u.colLo[j], u.colHi[j], u.colWt[j]
				top, bot := v*(1-a), v*a
				r0[l] += top * (1 - b)
				r0[h] += top * b
				r1[l] += bot * (1 - b)
				r1[h] += bot * b
			}
		}
	}
	return dx, nil
}

// Params returns nil: Upsample has no parameters.
func (u *Upsample) Params() []*Param { return nil }
