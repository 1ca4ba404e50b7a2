package corrupt

var (
	defocusParams = [5]struct{ radius, alias float64 }{{3, .1}, {4, .5}, {6, .5}, {8, .5}, {10, .5}}
	glassParams   = [5]struct {
		sigma       float64
		delta, iter int
	}{{.7, 1, 2}, {.9, 2, 1}, {1, 2, 3}, {1.1, 3, 2}, {1.5, 4, 2}}
	motionParams = [5]struct {
		radius int
		sigma  float64
	}{{10, 3}, {15, 5}, {15, 8}, {15, 12}, {20, 15}}
)

// zoomFactors are numpy's arange(1, stop, step) for each severity, which
// includes the endpoint 1.11 at severity 1 through float rounding.
var zoomFactors = [5][]float64{
	{1, 1.01, 1.02, 1.03, 1.04, 1.05, 1.06, 1.07, 1.08, 1.09, 1.10, 1.11},
	{1, 1.01, 1.02, 1.03, 1.04, 1.05, 1.06, 1.07, 1.08, 1.09, 1.10, 1.11, 1.12, 1.13, 1.14, 1.15},
	{1, 1.02, 1.04, 1.06, 1.08, 1.10, 1.12, 1.14, 1.16, 1.18, 1.20},
	{1, 1.02, 1.04, 1.06, 1.08, 1.10, 1.12, 1.14, 1.16, 1.18, 1.20, 1.22, 1.24},
	{1, 1.03, 1.06, 1.09, 1.12, 1.15, 1.18, 1.21, 1.24, 1.27, 1.30},
}

// defocusBlur convolves with imagecorruptions' disk(radius, alias_blur): the
// aliased disk X^2+Y^2 <= r^2 (normalized), then a Gaussian of sigma
// alias_blur over 3 taps (r <= 8) or 5 taps, with OpenCV's reflect-101
// border. The disk is evaluated with per-row prefix sums (one box per disk
// row), and the alias Gaussian is applied to the image afterwards, which is
// the same convolution since convolution is associative.
func (c *Corruptor) defocusBlur(dst, src []uint8, w, h, s int) {
	p := defocusParams[s]
	r := int(p.radius)
	img := c.buf(0, w*h*3)
	toFloat(img, src)

	// Prefix sums of the reflect-101 padded image, one row per padded row.
	pw, ph := w+2*r, h+2*r
	stride := (pw + 1) * 3
	pre := c.buf(1, ph*stride)
	for py := 0; py < ph; py++ {
		sy := borderReflect101.index(py-r, h)
		srow := img[sy*w*3 : (sy+1)*w*3]
		prow := pre[py*stride : (py+1)*stride]
		prow[0], prow[1], prow[2] = 0, 0, 0
		for px := 0; px < pw; px++ {
			sx := borderReflect101.index(px-r, w)
			for ch := 0; ch < 3; ch++ {
				prow[(px+1)*3+ch] = prow[px*3+ch] + srow[sx*3+ch]
			}
		}
	}
	count := 0
	half := c.offs[:0]
	for dy := -r; dy <= r; dy++ {
		hw := 0
		for (hw+1)*(hw+1)+dy*dy <= r*r {
			hw++
		}
		half = append(half, hw)
		count += 2*hw + 1
	}
	c.offs = half
	inv := 1 / float32(count)
	out := c.buf(2, w*h*3)
	for y := 0; y < h; y++ {
		o := out[y*w*3 : (y+1)*w*3]
		clear(o)
		for j, hw := range half {
			prow := pre[(y+j)*stride : (y+j+1)*stride]
			hi := prow[(r+hw+1)*3 : (r+hw+1)*3+w*3]
			lo := prow[(r-hw)*3 : (r-hw)*3+w*3]
			for i := range o {
				o[i] += hi[i] - lo[i]
			}
		}
		for i := range o {
			o[i] *= inv
		}
	}
	taps := 1
	if r > 8 {
		taps = 2
	}
	c.kern = gaussTaps(p.alias, taps, c.kern)
	c.pad = grow(c.pad, (w+len(c.kern))*3)
	convSeparable(out, out, c.buf(3, w*h*3), c.pad, w, h, 3, c.kern, c.kern, borderReflect101)
	fromFloat(dst, out)
}

// glassBlur: Gaussian blur, then local pixel swaps (for `iter` passes, each
// pixel from the bottom-right corner back swaps with a neighbour offset by
// randint(-delta, delta) per axis, upper bound exclusive), then blur again.
func (c *Corruptor) glassBlur(dst, src []uint8, w, h, s int) {
	p := glassParams[s]
	img := c.buf(0, w*h*3)
	toFloat(img, src)
	c.gaussianBlur(img, w, h, 3, p.sigma, borderClamp)
	px := grow(c.u8, w*h*3)
	c.u8 = px
	fromFloat(px, img)
	d := p.delta
	for range p.iter {
		for y := h - d; y > d; y-- {
			for x := w - d; x > d; x-- {
				dx := c.rng.IntN(2*d) - d
				dy := c.rng.IntN(2*d) - d
				a := (y*w + x) * 3
				b := ((y+dy)*w + x + dx) * 3
				px[a], px[b] = px[b], px[a]
				px[a+1], px[b+1] = px[b+1], px[a+1]
				px[a+2], px[b+2] = px[b+2], px[a+2]
			}
		}
	}
	toFloat(img, px)
	c.gaussianBlur(img, w, h, 3, p.sigma, borderClamp)
	fromFloat(dst, img)
}

// motionBlur: one-sided normalized Gaussian kernel of 2*radius+1 taps along
// a random angle in [-45, 45] degrees, sampling with edge clamping.
func (c *Corruptor) motionBlur(dst, src []uint8, w, h, s int) {
	p := motionParams[s]
	angle := c.rng.Float64()*90 - 45
	img := c.buf(0, w*h*3)
	toFloat(img, src)
	out := c.buf(1, w*h*3)
	c.kern = motionKernel(p.radius, p.sigma, c.kern)
	var dx, dy []int
	dx, dy = motionOffsets(p.radius, angle, c.offs)
	c.offs = dx[:cap(dx)]
	motionBlurPlane(out, img, w, h, 3, c.kern, dx, dy)
	fromFloat(dst, out)
}

// zoomBlur averages the image with centred bilinear zooms of itself
// (imagecorruptions' clipped_zoom for each factor, the image counted once
// more: (x + sum_z zoom_z(x)) / (n+1)).
func (c *Corruptor) zoomBlur(dst, src []uint8, w, h, s int) {
	img := c.buf(0, w*h*3)
	toFloat(img, src)
	acc := c.buf(1, w*h*3)
	copy(acc, img)
	c.idx = grow(c.idx, w+h)
	c.wts = grow(c.wts, w+h)
	xi, yi := c.idx[:w], c.idx[w:]
	xf, yf := c.wts[:w], c.wts[w:]
	zs := zoomFactors[s]
	for _, z := range zs {
		zoomAxis(w, z, xi, xf)
		zoomAxis(h, z, yi, yf)
		bilinearResample(acc, img, w, h, 3, xi, xf, yi, yf, true)
	}
	inv := 1 / float32(len(zs)+1)
	for i := range acc {
		acc[i] *= inv
	}
	fromFloat(dst, acc)
}
