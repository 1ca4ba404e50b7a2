package corrupt

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math"
)

var (
	brightnessDelta = [5]float64{.1, .2, .3, .4, .5}
	contrastFactor  = [5]float64{.4, .3, .2, .1, .05}
	elasticAlpha    = [5]float64{250 * .05, 250 * .065, 250 * .085, 250 * .1, 250 * .12}
	pixelateScale   = [5]float64{.6, .5, .4, .3, .25}
	jpegQuality     = [5]int{25, 18, 15, 10, 7}
	colorQuantBits  = [5]uint{5, 4, 3, 2, 1}
)

// brightness adds delta to the HSV value. With hue and saturation fixed,
// HSV->RGB is linear in V, so every channel scales by V'/V with
// V' = min(V+delta, 1); black (S = 0) becomes gray delta.
func (c *Corruptor) brightness(dst, src []uint8, w, h, s int) {
	d := float32(brightnessDelta[s])
	for i := 0; i+2 < len(src); i += 3 {
		r, g, b := src[i], src[i+1], src[i+2]
		m := max(r, g, b)
		if m == 0 {
			v := clipByte(d)
			dst[i], dst[i+1], dst[i+2] = v, v, v
			continue
		}
		vm := float32(m) / 255
		f := min(vm+d, 1) / vm / 255
		dst[i], dst[i+1], dst[i+2] = clipByte(float32(r)*f), clipByte(float32(g)*f), clipByte(float32(b)*f)
	}
}

// contrast: (x - mean) * k + mean with the per-channel image mean.
func (c *Corruptor) contrast(dst, src []uint8, w, h, s int) {
	var sum [3]uint64
	for i := 0; i+2 < len(src); i += 3 {
		sum[0] += uint64(src[i])
		sum[1] += uint64(src[i+1])
		sum[2] += uint64(src[i+2])
	}
	n := float64(w * h)
	k := float32(contrastFactor[s])
	var mean [3]float32
	for ch := range mean {
		mean[ch] = float32(float64(sum[ch]) / n / 255)
	}
	for i, v := range src {
		m := mean[i%3]
		dst[i] = clipByte((float32(v)/255-m)*k + m)
	}
}

// elasticTransform displaces every pixel by (dx, dy) fields drawn
// U(-0.005H, 0.005H), smoothed by a Gaussian of sigma (0.01H, 0.01W)
// (truncate 3, symmetric border) and scaled by alpha, then resamples
// bilinearly with a symmetric border.
func (c *Corruptor) elasticTransform(dst, src []uint8, w, h, s int) {
	n := w * h
	alpha := float32(elasticAlpha[s])
	maxD := 0.005 * float64(h)
	fx, fy := c.buf(1, n), c.buf(2, n)
	for i := range fx {
		fx[i] = float32((c.rng.Float64()*2 - 1) * maxD)
	}
	for i := range fy {
		fy[i] = float32((c.rng.Float64()*2 - 1) * maxD)
	}
	c.kern = gaussKernel(0.01*float64(w), 3, c.kern)
	c.kern2 = gaussKernel(0.01*float64(h), 3, c.kern2)
	c.pad = grow(c.pad, w+len(c.kern))
	tmp := c.buf(3, n)
	convSeparable(fx, fx, tmp, c.pad, w, h, 1, c.kern, c.kern2, borderSymmetric)
	convSeparable(fy, fy, tmp, c.pad, w, h, 1, c.kern, c.kern2, borderSymmetric)

	img := c.buf(0, n*3)
	toFloat(img, src)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			i := y*w + x
			sx := float64(x) + float64(alpha*fx[i])
			sy := float64(y) + float64(alpha*fy[i])
			x0f, y0f := math.Floor(sx), math.Floor(sy)
			tx, ty := float32(sx-x0f), float32(sy-y0f)
			x0, y0 := int(x0f), int(y0f)
			xa, xb := borderSymmetric.index(x0, w), borderSymmetric.index(x0+1, w)
			ya, yb := borderSymmetric.index(y0, h), borderSymmetric.index(y0+1, h)
			for ch := 0; ch < 3; ch++ {
				p00 := img[(ya*w+xa)*3+ch]
				p01 := img[(ya*w+xb)*3+ch]
				p10 := img[(yb*w+xa)*3+ch]
				p11 := img[(yb*w+xb)*3+ch]
				a := p00 + tx*(p01-p00)
				b := p10 + tx*(p11-p10)
				dst[i*3+ch] = clipByte(a + ty*(b-a))
			}
		}
	}
}

// pixelate: box downscale to int(W*c) x int(H*c) (each output pixel is the
// mean of the source pixels whose centres it covers, as PIL's BOX filter),
// then nearest-neighbour upscale back to W x H.
func (c *Corruptor) pixelate(dst, src []uint8, w, h, s int) {
	sc := pixelateScale[s]
	sw, sh := max(1, int(float64(w)*sc)), max(1, int(float64(h)*sc))
	img := c.buf(0, w*h*3)
	toFloat(img, src)
	// Horizontal pass: h x sw.
	tmp := c.buf(1, h*sw*3)
	for y := 0; y < h; y++ {
		row := img[y*w*3 : (y+1)*w*3]
		for i := 0; i < sw; i++ {
			j0, j1 := boxRange(i, w, sw)
			var acc [3]float32
			for j := j0; j < j1; j++ {
				acc[0] += row[j*3]
				acc[1] += row[j*3+1]
				acc[2] += row[j*3+2]
			}
			inv := 1 / float32(j1-j0)
			o := tmp[(y*sw+i)*3:]
			o[0], o[1], o[2] = acc[0]*inv, acc[1]*inv, acc[2]*inv
		}
	}
	small := c.buf(2, sh*sw*3)
	clear(small)
	for i := 0; i < sh; i++ {
		j0, j1 := boxRange(i, h, sh)
		o := small[i*sw*3 : (i+1)*sw*3]
		for j := j0; j < j1; j++ {
			seg := tmp[j*sw*3 : (j+1)*sw*3]
			for k, v := range seg {
				o[k] += v
			}
		}
		inv := 1 / float32(j1-j0)
		for k := range o {
			o[k] *= inv
		}
	}
	for y := 0; y < h; y++ {
		sy := min(sh-1, int((float64(y)+0.5)*float64(sh)/float64(h)))
		for x := 0; x < w; x++ {
			sx := min(sw-1, int((float64(x)+0.5)*float64(sw)/float64(w)))
			p := small[(sy*sw+sx)*3:]
			o := dst[(y*w+x)*3:]
			o[0], o[1], o[2] = clipByte(p[0]), clipByte(p[1]), clipByte(p[2])
		}
	}
}

// boxRange returns the source pixels [j0, j1) whose centres fall in output
// pixel i when n source pixels shrink to m (never empty).
func boxRange(i, n, m int) (int, int) {
	scale := float64(n) / float64(m)
	j0 := int(math.Ceil(float64(i)*scale - 0.5))
	j1 := int(math.Ceil(float64(i+1)*scale - 0.5))
	j0 = min(max(j0, 0), n-1)
	j1 = min(max(j1, j0+1), n)
	return j0, j1
}

type jpegScratch struct {
	img *image.RGBA
	buf bytes.Buffer
	rd  bytes.Reader
}

// jpegCompression round-trips the image through image/jpeg at the quality
// of the severity (4:2:0 chroma, like PIL's default).
func (c *Corruptor) jpegCompression(dst, src []uint8, w, h, s int) error {
	js := &c.jpeg
	if js.img == nil || js.img.Rect.Dx() != w || js.img.Rect.Dy() != h {
		js.img = image.NewRGBA(image.Rect(0, 0, w, h))
	}
	pix := js.img.Pix
	for i := 0; i < w*h; i++ {
		pix[4*i], pix[4*i+1], pix[4*i+2], pix[4*i+3] = src[3*i], src[3*i+1], src[3*i+2], 255
	}
	js.buf.Reset()
	if err := jpeg.Encode(&js.buf, js.img, &jpeg.Options{Quality: jpegQuality[s]}); err != nil {
		return fmt.Errorf("jpeg encode: %w", err)
	}
	js.rd.Reset(js.buf.Bytes())
	dec, err := jpeg.Decode(&js.rd)
	if err != nil {
		return fmt.Errorf("jpeg decode: %w", err)
	}
	if dec.Bounds() != js.img.Rect {
		return fmt.Errorf("jpeg round trip changed size %v to %v", js.img.Rect, dec.Bounds())
	}
	if yc, ok := dec.(*image.YCbCr); ok {
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				yi, ci := yc.YOffset(x, y), yc.COffset(x, y)
				r, g, b := color.YCbCrToRGB(yc.Y[yi], yc.Cb[ci], yc.Cr[ci])
				o := (y*w + x) * 3
				dst[o], dst[o+1], dst[o+2] = r, g, b
			}
		}
		return nil
	}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			r, g, b, _ := dec.At(x, y).RGBA()
			o := (y*w + x) * 3
			dst[o], dst[o+1], dst[o+2] = uint8(r>>8), uint8(g>>8), uint8(b>>8)
		}
	}
	return nil
}

// colorQuant keeps the top 5, 4, 3, 2, 1 bits of each channel (PIL
// ImageOps.posterize).
func (c *Corruptor) colorQuant(dst, src []uint8, w, h, s int) {
	mask := uint8(0xFF << (8 - colorQuantBits[s]))
	for i, v := range src {
		dst[i] = v & mask
	}
}
