package infer

import "fmt"

// Resizer scales interleaved RGB8 images of one source size to one
// destination size with bilinear interpolation (pixel centres aligned, as
// OpenCV's INTER_LINEAR). The sample positions and weights are computed
// once per source size, so Resize allocates nothing.
type Resizer struct {
	dstW, dstH int
	srcW, srcH int
	x0, x1     []int32 // byte offsets of the two source columns per destination column
	wx         []float32
	y0, y1     []int32 // source rows per destination row
	wy         []float32
	dst        []uint8
}

// NewResizer returns a resizer to dstW x dstH.
func NewResizer(dstW, dstH int) *Resizer {
	return &Resizer{dstW: dstW, dstH: dstH, dst: make([]uint8, 3*dstW*dstH),
		x0: make([]int32, dstW), x1: make([]int32, dstW), wx: make([]float32, dstW),
		y0: make([]int32, dstH), y1: make([]int32, dstH), wy: make([]float32, dstH)}
}

// taps fills the two source indices and the weight of the second for each
// destination index: src = (d + 0.5) * n/m - 0.5, clamped to the image.
func taps(n, m int, i0, i1 []int32, w []float32, mul int32) {
	scale := float64(n) / float64(m)
	for d := range m {
		s := (float64(d)+0.5)*scale - 0.5
		if s < 0 {
			s = 0
		}
		a := int(s)
		if a > n-1 {
			a = n - 1
		}
		b := min(a+1, n-1)
		i0[d], i1[d], w[d] = int32(a)*mul, int32(b)*mul, float32(s-float64(a))
	}
}

// Resize returns the resized image (owned by the Resizer, valid until the
// next call). An image already at the destination size is returned as is.
func (r *Resizer) Resize(src []uint8, w, h int) ([]uint8, error) {
	if w <= 0 || h <= 0 || len(src) < 3*w*h {
		return nil, fmt.Errorf("resize: frame of %d bytes is not a %dx%d RGB image", len(src), w, h)
	}
	if w == r.dstW && h == r.dstH {
		return src[:3*w*h], nil
	}
	if w != r.srcW || h != r.srcH {
		taps(w, r.dstW, r.x0, r.x1, r.wx, 3)
		taps(h, r.dstH, r.y0, r.y1, r.wy, int32(3*w))
		r.srcW, r.srcH = w, h
	}
	dst := r.dst
	for y := range r.dstH {
		row0, row1 := src[r.y0[y]:], src[r.y1[y]:]
		fy := r.wy[y]
		o := 3 * y * r.dstW
		for x := range r.dstW {
			a, b, fx := r.x0[x], r.x1[x], r.wx[x]
			for c := int32(0); c < 3; c++ {
				top := float32(row0[a+c]) + fx*(float32(row0[b+c])-float32(row0[a+c]))
				bot := float32(row1[a+c]) + fx*(float32(row1[b+c])-float32(row1[a+c]))
				dst[o] = uint8(top + fy*(bot-top) + 0.5)
				o++
			}
		}
	}
	return dst, nil
}
