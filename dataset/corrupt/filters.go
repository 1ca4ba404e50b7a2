package corrupt

import (
	"math"
)

// toFloat maps bytes to [0,1].
func toFloat(dst []float32, src []uint8) {
	for i, v := range src {
		dst[i] = float32(v) * (1.0 / 255)
	}
}

// fromFloat clips to [0,1] and rounds to bytes. (The Python reference
// truncates with np.uint8; rounding avoids its -0.5 level bias.)
func fromFloat(dst []uint8, src []float32) {
	for i, v := range src {
		dst[i] = clipByte(v)
	}
}

func clipByte(v float32) uint8 {
	if !(v > 0) { // also NaN
		return 0
	}
	if v >= 1 {
		return 255
	}
	return uint8(v*255 + 0.5)
}

func clip01(v float32) float32 {
	if v < 0 {
		return 0
	}
	if v > 1 {
		return 1
	}
	return v
}

// border is how an index outside [0,n) maps back inside.
type border int

const (
	borderClamp      border = iota // aaa|abcd|ddd (scipy "nearest", ImageMagick edge)
	borderSymmetric                // cba|abcd|dcb (scipy "reflect")
	borderReflect101               // dcb|abcd|cba (OpenCV default)
)

func (b border) index(i, n int) int {
	if i >= 0 && i < n {
		return i
	}
	switch b {
	case borderSymmetric:
		p := 2 * n
		i %= p
		if i < 0 {
			i += p
		}
		if i >= n {
			i = p - 1 - i
		}
		return i
	case borderReflect101:
		if n == 1 {
			return 0
		}
		p := 2*n - 2
		i %= p
		if i < 0 {
			i += p
		}
		if i >= n {
			i = p - i
		}
		return i
	default:
		if i < 0 {
			return 0
		}
		return n - 1
	}
}

// gaussKernel returns normalized Gaussian taps with radius
// int(truncate*sigma+0.5), as scipy.ndimage.gaussian_filter builds them.
func gaussKernel(sigma, truncate float64, into []float32) []float32 {
	r := int(truncate*sigma + 0.5)
	return gaussTaps(sigma, r, into)
}

// gaussTaps returns 2r+1 normalized Gaussian taps, reusing into.
func gaussTaps(sigma float64, r int, into []float32) []float32 {
	k := grow(into, 2*r+1)
	var sum float64
	for i := -r; i <= r; i++ {
		v := math.Exp(-float64(i*i) / (2 * sigma * sigma))
		k[i+r] = float32(v)
		sum += v
	}
	for i := range k {
		k[i] = float32(float64(k[i]) / sum)
	}
	return k
}

// convSeparable filters an interleaved image (ch channels) with kx along x
// and ky along y, using tmp (len w*h*ch) and pad (len >= (w+len(kx))*ch) as
// scratch. dst may alias src but not tmp.
func convSeparable(dst, src, tmp, pad []float32, w, h, ch int, kx, ky []float32, b border) {
	rx := len(kx) / 2
	rowLen := w * ch
	for y := 0; y < h; y++ {
		row := src[y*rowLen : (y+1)*rowLen]
		p := pad[:(w+2*rx)*ch]
		for x := -rx; x < w+rx; x++ {
			sx := b.index(x, w)
			copy(p[(x+rx)*ch:(x+rx+1)*ch], row[sx*ch:(sx+1)*ch])
		}
		out := tmp[y*rowLen : (y+1)*rowLen]
		clear(out)
		for k, wk := range kx {
			seg := p[k*ch : k*ch+rowLen]
			for i, v := range seg {
				out[i] += wk * v
			}
		}
	}
	ry := len(ky) / 2
	for y := 0; y < h; y++ {
		out := dst[y*rowLen : (y+1)*rowLen]
		clear(out)
		for k, wk := range ky {
			sy := b.index(y+k-ry, h)
			seg := tmp[sy*rowLen : (sy+1)*rowLen]
			for i, v := range seg {
				out[i] += wk * v
			}
		}
	}
}

// gaussianBlur blurs an interleaved image in place with the same sigma on
// both axes (skimage.filters.gaussian: truncate 4, given border).
func (c *Corruptor) gaussianBlur(img []float32, w, h, ch int, sigma float64, b border) {
	c.kern = gaussKernel(sigma, 4, c.kern)
	tmp := c.buf(3, w*h*ch)
	c.pad = grow(c.pad, (w+len(c.kern))*ch)
	convSeparable(img, img, tmp, c.pad, w, h, ch, c.kern, c.kern, b)
}

// motionOffsets returns ImageMagick's MotionBlurImage tap offsets for a
// kernel of 2*radius+1 taps along angle (degrees), reusing into.
func motionOffsets(radius int, angleDeg float64, into []int) (dx, dy []int) {
	width := 2*radius + 1
	a := angleDeg * math.Pi / 180
	px, py := float64(width)*math.Sin(a), float64(width)*math.Cos(a)
	hyp := math.Hypot(px, py)
	into = grow(into, 2*width)
	dx, dy = into[:width], into[width:]
	for i := range width {
		dx[i] = int(math.Ceil(float64(i)*py/hyp - 0.5))
		dy[i] = int(math.Ceil(float64(i)*px/hyp - 0.5))
	}
	return dx, dy
}

// motionKernel is the one-sided Gaussian exp(-i^2/(2 sigma^2)), i = 0..2r,
// normalized to sum 1 (ImageMagick normalizes its motion kernel).
func motionKernel(radius int, sigma float64, into []float32) []float32 {
	k := grow(into, 2*radius+1)
	var sum float64
	for i := range k {
		v := math.Exp(-float64(i*i) / (2 * sigma * sigma))
		k[i] = float32(v)
		sum += v
	}
	for i := range k {
		k[i] = float32(float64(k[i]) / sum)
	}
	return k
}

// motionBlurPlane computes dst(x,y) = sum_i k_i src(x+dx_i, y+dy_i) with
// edge clamping on an interleaved image. dst must not alias src.
func motionBlurPlane(dst, src []float32, w, h, ch int, k []float32, dx, dy []int) {
	rowLen := w * ch
	clear(dst)
	for i, wk := range k {
		ox, oy := dx[i], dy[i]
		// x range where x+ox is inside: [x0, x1)
		x0, x1 := max(0, -ox), min(w, w-ox)
		for y := 0; y < h; y++ {
			sy := min(max(y+oy, 0), h-1)
			srow := src[sy*rowLen : (sy+1)*rowLen]
			drow := dst[y*rowLen : (y+1)*rowLen]
			if x0 >= x1 { // shift beyond the image: every tap clamps
				for x := 0; x < w; x++ {
					sx := min(max(x+ox, 0), w-1)
					for c := 0; c < ch; c++ {
						drow[x*ch+c] += wk * srow[sx*ch+c]
					}
				}
				continue
			}
			for x := 0; x < x0; x++ {
				for c := 0; c < ch; c++ {
					drow[x*ch+c] += wk * srow[c]
				}
			}
			seg := srow[(x0+ox)*ch : (x1+ox)*ch]
			out := drow[x0*ch : x1*ch]
			for j, v := range seg {
				out[j] += wk * v
			}
			last := srow[(w-1)*ch:]
			for x := x1; x < w; x++ {
				for c := 0; c < ch; c++ {
					drow[x*ch+c] += wk * last[c]
				}
			}
		}
	}
}

// zoomAxis gives, for each of n output positions, the bilinear source index
// i0 (i1 = i0+1 clamped) and weight of i1 for imagecorruptions'
// clipped_zoom along one axis: crop ceil(n/z) centred samples, zoom them by
// scipy.ndimage.zoom(order=1) to round(ch*z) and keep the centred n.
func zoomAxis(n int, z float64, i0 []int32, f []float32) {
	ch := int(math.Ceil(float64(n) / z))
	top := (n - ch) / 2
	outN := int(math.RoundToEven(float64(ch) * z))
	trim := (outN - n) / 2
	scale := 0.0
	if outN > 1 {
		scale = float64(ch-1) / float64(outN-1)
	}
	for o := 0; o < n; o++ {
		p := float64(top) + float64(o+trim)*scale
		p = math.Max(0, math.Min(p, float64(n-1)))
		i := int(p)
		if i >= n-1 {
			i0[o], f[o] = int32(n-1), 0
			continue
		}
		i0[o], f[o] = int32(i), float32(p-float64(i))
	}
}

// bilinearResample writes dst(x,y) = src sampled at (xs[x], ys[y]) given by
// per-axis index/weight tables (separable sampling grid).
func bilinearResample(dst, src []float32, w, h, ch int, xi []int32, xf []float32, yi []int32, yf []float32, accumulate bool) {
	rowLen := w * ch
	for y := 0; y < h; y++ {
		y0 := int(yi[y])
		y1 := min(y0+1, h-1)
		fy := yf[y]
		r0 := src[y0*rowLen : (y0+1)*rowLen]
		r1 := src[y1*rowLen : (y1+1)*rowLen]
		out := dst[y*rowLen : (y+1)*rowLen]
		for x := 0; x < w; x++ {
			x0 := int(xi[x])
			x1 := min(x0+1, w-1)
			fx := xf[x]
			for c := 0; c < ch; c++ {
				a := r0[x0*ch+c] + fx*(r0[x1*ch+c]-r0[x0*ch+c])
				b := r1[x0*ch+c] + fx*(r1[x1*ch+c]-r1[x0*ch+c])
				v := a + fy*(b-a)
				if accumulate {
					out[x*ch+c] += v
				} else {
					out[x*ch+c] = v
				}
			}
		}
	}
}
