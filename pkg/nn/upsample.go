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
	// rows holds horizontally interpolated (forward) or vertically gathered
	// (backward) source rows of one plane, W·Factor values each.
	rows []float32
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
	u.setShape(sh[0], sh[1], sh[2], sh[3])
	u.have = true
	f := u.Factor
	H, W := u.h*f, u.w*f
	y := reuse(&u.out, u.n, u.c, H, W)
	ys := Data(y)
	rows := grow(&u.rows, 2*W)
	for p := 0; p < u.n*u.c; p++ {
		u.plane(xs[p*u.h*u.w:(p+1)*u.h*u.w], ys[p*H*W:(p+1)*H*W], W, rows)
	}
	return y, nil
}

// setShape records the input shape (N, C, h, w) and builds the
// interpolation tables when h, w or the factor changed.
func (u *Upsample) setShape(n, c, h, w int) {
	u.n, u.c, u.h, u.w = n, c, h, w
	f := u.Factor
	if u.tabH != u.h || u.tabW != u.w || u.tabF != f {
		halfPixelTable(u.h, f, &u.rowLo, &u.rowHi, &u.rowWt)
		halfPixelTable(u.w, f, &u.colLo, &u.colHi, &u.colWt)
		u.tabH, u.tabW, u.tabF = u.h, u.w, f
	}
}

// plane interpolates one h × w plane src into dst, whose H = h·Factor rows
// of W = w·Factor values start pitch values apart (pitch W for a plain
// output; a convolution's padded plane for Conv2d.ForwardConcat, which
// thereby reads the same values Forward would have written). rows is
// scratch for 2·W values.
//
// Each output row blends two source rows already interpolated along the
// width: every source row is interpolated once (into one of two slots),
// not once per output row that reads it. The arithmetic per value is
// unchanged: top = r0[l] + b(r0[h] − r0[l]), out = top + a(bot − top).
func (u *Upsample) plane(src, dst []float32, pitch int, rows []float32) {
	f := u.Factor
	H, W := u.h*f, u.w*f
	slot := [2]int{-1, -1}
	row := func(r int) []float32 {
		for k := range slot {
			if slot[k] == r {
				return rows[k*W : (k+1)*W]
			}
		}
		k := 0
		if slot[0] >= 0 && (slot[1] < 0 || slot[1] < slot[0]) {
			k = 1 // replace the older (lower) row
		}
		slot[k] = r
		h, sr := rows[k*W:(k+1)*W], src[r*u.w:(r+1)*u.w]
		if f == 2 {
			widen2(h, sr)
		} else {
			u.widen(h, sr)
		}
		return h
	}
	for i := 0; i < H; i++ {
		top, bot := row(u.rowLo[i]), row(u.rowHi[i])
		a := u.rowWt[i]
		lerp(dst[i*pitch:i*pitch+W], top, bot, a)
	}
}

// lerp writes top[j] + a·(bot[j] − top[j]) to out[j]: 8 values at a time in
// kernelLerp where it runs. The conversion keeps the product rounded on
// its own (no fused multiply-add, which Go may use on some targets), as
// the kernel rounds it: the same bits either way (TestUpsampleKernels).
func lerp(out, top, bot []float32, a float32) {
	bot = bot[:len(out)]
	top = top[:len(out)]
	n := 0
	if haveElementwise && len(out) >= 8 {
		n = len(out) &^ 7
		kernelLerp(&out[0], &top[0], &bot[0], a, n)
	}
	for j := n; j < len(out); j++ {
		out[j] = top[j] + float32(a*(bot[j]-top[j]))
	}
}

// widen interpolates one source row sr along the width into h (the tables'
// source columns and weights).
func (u *Upsample) widen(h, sr []float32) {
	for j := range h {
		l, hi, b := u.colLo[j], u.colHi[j], u.colWt[j]
		h[j] = sr[l] + float32(b*(sr[hi]-sr[l]))
	}
}

// widen2 is widen for factor 2 without the tables: output column 2m+1
// samples m + 1/4 and column 2m samples m − 1/4, so the pairs are
// (m, m+1, 1/4) and (m−1, m, 3/4), clamped at the borders: the tables'
// exact values and the same arithmetic.
func widen2(h, sr []float32) {
	w := len(sr)
	h = h[:2*w]
	last := sr[w-1]
	h[0] = sr[0] + float32(0*(sr[min(1, w-1)]-sr[0]))
	n := 0
	if haveElementwise && w-1 >= 8 {
		n = (w - 1) &^ 7
		kernelWiden2(&h[1], &sr[0], n) // columns 1 .. 2n, 8 values of m at a time
	}
	for m := n; m < w-1; m++ {
		a, b := sr[m], sr[m+1]
		h[2*m+1] = a + float32(0.25*(b-a))
		h[2*m+2] = a + float32(0.75*(b-a))
	}
	h[2*w-1] = last + float32(0.25*(last-last))
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
	// The adjoint in two passes: gather each output row into its two source
	// rows with the row weights (1 − a, a), then spread each gathered row to
	// its source columns with the column weights (1 − b, b).
	gath := grow(&u.rows, u.h*W)
	for p := 0; p < u.n*u.c; p++ {
		src, dst := g[p*H*W:(p+1)*H*W], dxs[p*u.h*u.w:(p+1)*u.h*u.w]
		clear32(gath)
		for i := 0; i < H; i++ {
			a := u.rowWt[i]
			in := src[i*W : (i+1)*W]
			r0, r1 := gath[u.rowLo[i]*W:(u.rowLo[i]+1)*W], gath[u.rowHi[i]*W:(u.rowHi[i]+1)*W]
			r0, r1 = r0[:len(in)], r1[:len(in)]
			for j, v := range in {
				r0[j] += v * (1 - a)
				r1[j] += v * a
			}
		}
		for r := 0; r < u.h; r++ {
			row, out := gath[r*W:(r+1)*W], dst[r*u.w:(r+1)*u.w]
			for j, v := range row {
				l, h, b := u.colLo[j], u.colHi[j], u.colWt[j]
				out[l] += v * (1 - b)
				out[h] += v * b
			}
		}
	}
	return dx, nil
}

// Params returns nil: Upsample has no parameters.
func (u *Upsample) Params() []*Param { return nil }
