package corrupt

import "math"

var (
	snowParams = [5]struct {
		loc, scale, zoom, threshold float64
		radius                      int
		sigma, blend                float64
	}{
		{.1, .3, 3, .5, 10, 4, .8},
		{.2, .3, 2, .5, 12, 4, .7},
		{.55, .3, 4, .9, 12, 8, .7},
		{.55, .3, 4.5, .85, 12, 8, .65},
		{.55, .3, 2.5, .85, 12, 12, .55},
	}
	frostParams = [5]struct{ image, frost float64 }{{1, .4}, {.8, .6}, {.7, .7}, {.65, .7}, {.6, .75}}
	fogParams   = [5]struct{ strength, decay float64 }{{1.5, 2}, {2, 2}, {2.5, 1.7}, {2.5, 1.5}, {3, 1.4}}
)

// frostTint colours the procedural ice (bluish white, like frost photos).
var frostTint = [3]float32{0.86, 0.93, 1.0}

// snow: a Gaussian(loc, scale) field, zoomed by `zoom` (clipped_zoom),
// thresholded, motion-blurred along an angle in [-135, -45] degrees and
// added twice (as is and rotated by 180 degrees) to the image, whose
// brightness is first lifted towards max(x, 1.5*gray + 0.5).
func (c *Corruptor) snow(dst, src []uint8, w, h, s int) {
	p := snowParams[s]
	n := w * h
	layer := c.buf(1, n)
	for i := range layer {
		layer[i] = float32(p.loc + p.scale*c.rng.NormFloat64())
	}
	zoomed := c.buf(2, n)
	c.idx = grow(c.idx, w+h)
	c.wts = grow(c.wts, w+h)
	zoomAxis(w, p.zoom, c.idx[:w], c.wts[:w])
	zoomAxis(h, p.zoom, c.idx[w:], c.wts[w:])
	bilinearResample(zoomed, layer, w, h, 1, c.idx[:w], c.wts[:w], c.idx[w:], c.wts[w:], false)
	thr := float32(p.threshold)
	for i, v := range zoomed {
		if v < thr {
			v = 0
		}
		zoomed[i] = quant8(v) // the reference stores the layer as an 8-bit PNG
	}
	angle := c.rng.Float64()*90 - 135
	c.kern = motionKernel(p.radius, p.sigma, c.kern)
	dx, dy := motionOffsets(p.radius, angle, c.offs)
	c.offs = dx[:cap(dx)]
	motionBlurPlane(layer, zoomed, w, h, 1, c.kern, dx, dy)
	for i, v := range layer {
		layer[i] = quant8(v)
	}

	blend := float32(p.blend)
	for i := 0; i < n; i++ {
		r := float32(src[3*i]) / 255
		g := float32(src[3*i+1]) / 255
		b := float32(src[3*i+2]) / 255
		lift := (0.299*r+0.587*g+0.114*b)*1.5 + 0.5
		flake := layer[i] + layer[n-1-i]
		for ch, v := range [3]float32{r, g, b} {
			v = blend*v + (1-blend)*max(v, lift)
			dst[3*i+ch] = clipByte(v + flake)
		}
	}
}

func quant8(v float32) float32 { return float32(clipByte(v)) / 255 }

// frost: a*x + b*F, with F a procedural frost texture (see frostTexture).
func (c *Corruptor) frost(dst, src []uint8, w, h, s int) {
	p := frostParams[s]
	tex := c.frostTexture(w, h)
	a, b := float32(p.image), float32(p.frost)
	for i := 0; i < w*h; i++ {
		t := tex[i]
		for ch := 0; ch < 3; ch++ {
			v := float32(src[3*i+ch]) / 255
			dst[3*i+ch] = clipByte(a*v + b*t*frostTint[ch])
		}
	}
}

// frostTexture draws ice on dark glass into scratch plane 1 (values 0..1):
// a dim mottled background (two octaves of value noise) and fern-like
// crystals (a stem with side branches at about +-60 degrees, branching once
// more), sharpened by a small blur and given a soft glow. Like the photos
// that imagecorruptions crops, it is mostly dark with bright crystals, so
// that a larger frost weight hides more of the image.
func (c *Corruptor) frostTexture(w, h int) []float32 {
	n := w * h
	tex := c.buf(1, n)
	c.valueNoise(tex, w, h, 48, 0.16, false)
	c.valueNoise(tex, w, h, 12, 0.08, true)

	ice := c.buf(2, n)
	clear(ice)
	crystals := max(3, n/350)
	for range crystals {
		x := c.rng.Float64() * float64(w)
		y := c.rng.Float64() * float64(h)
		ang := c.rng.Float64() * 2 * math.Pi
		length := 6 + c.rng.Float64()*c.rng.Float64()*60
		c.drawBranch(ice, w, h, x, y, ang, length, 0.4, 2)
	}
	glow := c.buf(0, n)
	copy(glow, ice)
	c.gaussianBlur(ice, w, h, 1, 0.6, borderClamp)
	c.gaussianBlur(glow, w, h, 1, 3, borderClamp)
	for i := range tex {
		tex[i] = clip01(tex[i] + 1.6*ice[i] + 1.2*glow[i])
	}
	return tex
}

// valueNoise adds (or writes) amp times bilinear value noise with one random
// value per cell of `cell` pixels.
func (c *Corruptor) valueNoise(dst []float32, w, h, cell int, amp float32, add bool) {
	gw, gh := w/cell+2, h/cell+2
	grid := grow(c.pad, gw*gh)
	c.pad = grid
	for i := range grid {
		grid[i] = float32(c.rng.Float64())
	}
	inv := 1 / float32(cell)
	for y := 0; y < h; y++ {
		fy := float32(y) * inv
		gy := int(fy)
		ty := fy - float32(gy)
		for x := 0; x < w; x++ {
			fx := float32(x) * inv
			gx := int(fx)
			tx := fx - float32(gx)
			a := grid[gy*gw+gx] + tx*(grid[gy*gw+gx+1]-grid[gy*gw+gx])
			b := grid[(gy+1)*gw+gx] + tx*(grid[(gy+1)*gw+gx+1]-grid[(gy+1)*gw+gx])
			v := amp * (a + ty*(b-a))
			if add {
				dst[y*w+x] += v
			} else {
				dst[y*w+x] = v
			}
		}
	}
}

// drawBranch walks one crystal arm pixel by pixel with a slight wobble and
// spawns shorter side arms every few pixels while depth remains.
func (c *Corruptor) drawBranch(ice []float32, w, h int, x, y, ang, length float64, inten float32, depth int) {
	next := 3 + c.rng.Float64()*4
	for t := 0.0; t < length; t++ {
		xi, yi := int(x), int(y)
		if xi >= 0 && xi < w && yi >= 0 && yi < h {
			ice[yi*w+xi] += inten * float32(1-0.6*t/length)
		}
		if depth > 0 && t >= next {
			side := 1.0
			if c.rng.Uint64()&1 == 0 {
				side = -1
			}
			sub := (length - t) * (0.3 + 0.2*c.rng.Float64())
			c.drawBranch(ice, w, h, x, y, ang+side*(0.95+0.2*c.rng.Float64()), sub, inten*0.8, depth-1)
			next = t + 3 + c.rng.Float64()*4
		}
		ang += (c.rng.Float64() - 0.5) * 0.1
		x += math.Cos(ang)
		y += math.Sin(ang)
	}
}

// fog: x + s*P, rescaled by max(x)/(max(x)+s), with P a plasma fractal
// (diamond-square on a torus, map size the next power of two >= max(w,h),
// cropped to the top-left h x w).
func (c *Corruptor) fog(dst, src []uint8, w, h, s int) {
	p := fogParams[s]
	size := 2
	for size < max(w, h) {
		size *= 2
	}
	m := c.plasma(size, p.decay)
	var mx uint8
	for _, v := range src {
		mx = max(mx, v)
	}
	maxVal := float32(mx) / 255
	st := float32(p.strength)
	scale := maxVal / (maxVal + st)
	for y := 0; y < h; y++ {
		row := m[y*size : y*size+w]
		for x, f := range row {
			i := (y*w + x) * 3
			for ch := 0; ch < 3; ch++ {
				dst[i+ch] = clipByte((float32(src[i+ch])/255 + st*f) * scale)
			}
		}
	}
}

// plasma fills scratch plane 1 with a size x size plasma fractal in [0,1]
// (imagecorruptions' plasma_fractal: midpoints get the mean of their four
// neighbours plus wibble*U(-wibble, wibble), wibble starting at 100 and
// divided by decay per level).
func (c *Corruptor) plasma(size int, decay float64) []float32 {
	m := c.buf(1, size*size)
	m[0] = 0
	wib := 100.0
	mask := size - 1
	jitter := func() float32 { return float32(wib * (c.rng.Float64()*2 - 1) * wib) }
	for step := size; step >= 2; step /= 2 {
		half := step / 2
		for i := 0; i < size; i += step {
			i2 := (i + step) & mask
			for j := 0; j < size; j += step {
				j2 := (j + step) & mask
				sum := m[i*size+j] + m[i2*size+j] + m[i*size+j2] + m[i2*size+j2]
				m[(i+half)*size+j+half] = sum/4 + jitter()
			}
		}
		for i := 0; i < size; i += step {
			iu := (i - half) & mask
			i2 := (i + step) & mask
			for j := 0; j < size; j += step {
				jl := (j - half) & mask
				j2 := (j + step) & mask
				centre := m[(i+half)*size+j+half]
				top := centre + m[iu*size+j+half] + m[i*size+j] + m[i*size+j2]
				left := centre + m[(i+half)*size+jl] + m[i*size+j] + m[i2*size+j]
				m[i*size+j+half] = top/4 + jitter()
				m[(i+half)*size+j] = left/4 + jitter()
			}
		}
		wib /= decay
	}
	lo, hi := m[0], m[0]
	for _, v := range m {
		lo, hi = min(lo, v), max(hi, v)
	}
	inv := float32(0)
	if hi > lo {
		inv = 1 / (hi - lo)
	}
	for i, v := range m {
		m[i] = (v - lo) * inv
	}
	return m
}
