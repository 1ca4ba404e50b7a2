package corrupt

import (
	"fmt"
	"image"
	"math/rand/v2"
	"strings"
)

// corruption is one entry of the suite. apply reads src and writes dst (both
// w*h*3 interleaved RGB, possibly the same slice) at severity index s (0..4).
type corruption struct {
	name   string
	stream uint64 // PCG stream, so that one seed gives unrelated noise per type
	apply  func(c *Corruptor, dst, src []uint8, w, h, s int) error
}

// pure adapts a corruption that cannot fail.
func pure(f func(c *Corruptor, dst, src []uint8, w, h, s int)) func(*Corruptor, []uint8, []uint8, int, int, int) error {
	return func(c *Corruptor, dst, src []uint8, w, h, s int) error {
		f(c, dst, src, w, h, s)
		return nil
	}
}

// suite lists the corruptions in the order of the paper's supplementary list.
var suite = [...]corruption{
	{"gaussian_noise", 1, pure((*Corruptor).gaussianNoise)},
	{"shot_noise", 2, pure((*Corruptor).shotNoise)},
	{"impulse_noise", 3, pure((*Corruptor).impulseNoise)},
	{"iso_noise", 4, pure((*Corruptor).isoNoise)},
	{"defocus_blur", 5, pure((*Corruptor).defocusBlur)},
	{"glass_blur", 6, pure((*Corruptor).glassBlur)},
	{"motion_blur", 7, pure((*Corruptor).motionBlur)},
	{"zoom_blur", 8, pure((*Corruptor).zoomBlur)},
	{"snow", 9, pure((*Corruptor).snow)},
	{"frost", 10, pure((*Corruptor).frost)},
	{"fog", 11, pure((*Corruptor).fog)},
	{"dark", 12, pure((*Corruptor).dark)},
	{"brightness", 13, pure((*Corruptor).brightness)},
	{"contrast", 14, pure((*Corruptor).contrast)},
	{"elastic_transform", 15, pure((*Corruptor).elasticTransform)},
	{"pixelate", 16, pure((*Corruptor).pixelate)},
	{"jpeg_compression", 17, (*Corruptor).jpegCompression},
	{"color_quant", 18, pure((*Corruptor).colorQuant)},
}

// MaxSeverity is the highest severity; severities run from 1 to MaxSeverity.
const MaxSeverity = 5

// Names returns the corruption names in a fixed order (a fresh slice).
func Names() []string {
	out := make([]string, len(suite))
	for i, c := range suite {
		out[i] = c.name
	}
	return out
}

func lookup(name string) (*corruption, error) {
	for i := range suite {
		if suite[i].name == name {
			return &suite[i], nil
		}
	}
	return nil, fmt.Errorf("unknown corruption %q (want one of %s)", name, strings.Join(Names(), ", "))
}

// Validate reports whether name and severity denote a corruption of the suite.
func Validate(name string, severity int) error {
	if _, err := lookup(name); err != nil {
		return err
	}
	if severity < 1 || severity > MaxSeverity {
		return fmt.Errorf("corruption %q: severity %d out of range 1..%d", name, severity, MaxSeverity)
	}
	return nil
}

// Corruptor applies corruptions and keeps scratch memory between calls. The
// zero value is ready to use. A Corruptor is not safe for concurrent use;
// give each goroutine its own.
type Corruptor struct {
	pcg rand.PCG
	rng *rand.Rand

	f     [4][]float32 // float scratch planes, grown on demand
	u8    []uint8
	idx   []int32   // per-axis sampling indices
	wts   []float32 // per-axis sampling weights
	kern  []float32 // filter taps
	kern2 []float32 // second-axis filter taps
	pad   []float32 // padded row
	offs  []int     // motion blur offsets

	poisson map[float64]*poissonTable
	jpeg    jpegScratch
}

// NewCorruptor returns an empty Corruptor.
func NewCorruptor() *Corruptor { return &Corruptor{} }

// Validate is the package's Validate, so that a *Corruptor serves where an
// interface asks for both (the simulated rig's camera/simrig.Corruptor).
func (c *Corruptor) Validate(name string, severity int) error { return Validate(name, severity) }

// Apply corrupts src into dst with the named corruption at severity 1..5.
// src and dst are interleaved RGB of w*h*3 bytes and may be the same slice.
// The same seed always gives the same bytes.
func (c *Corruptor) Apply(dst, src []uint8, w, h int, name string, severity int, seed uint64) error {
	cr, err := lookup(name)
	if err != nil {
		return err
	}
	if severity < 1 || severity > MaxSeverity {
		return fmt.Errorf("corruption %q: severity %d out of range 1..%d", name, severity, MaxSeverity)
	}
	if w <= 0 || h <= 0 || w > 1<<15 || h > 1<<15 {
		return fmt.Errorf("corruption %q: bad image size %dx%d", name, w, h)
	}
	n := w * h * 3
	if len(src) != n {
		return fmt.Errorf("corruption %q: src has %d bytes, want %d for %dx%d RGB", name, len(src), n, w, h)
	}
	if len(dst) != n {
		return fmt.Errorf("corruption %q: dst has %d bytes, want %d for %dx%d RGB", name, len(dst), n, w, h)
	}
	if c.rng == nil {
		c.rng = rand.New(&c.pcg)
	}
	c.pcg.Seed(seed, 0x9e3779b97f4a7c15*cr.stream)
	if err := cr.apply(c, dst, src, w, h, severity-1); err != nil {
		return fmt.Errorf("corruption %q severity %d: %w", name, severity, err)
	}
	return nil
}

// Apply is Corruptor.Apply with a throwaway Corruptor (allocates scratch).
func Apply(dst, src []uint8, w, h int, name string, severity int, seed uint64) error {
	return NewCorruptor().Apply(dst, src, w, h, name, severity, seed)
}

// ImageToRGB converts any image to interleaved RGB, dropping alpha (an
// NRGBA/RGBA image is taken as composited over black, as image/color does).
// It reuses buf when it is large enough.
func ImageToRGB(img image.Image, buf []uint8) (rgb []uint8, w, h int) {
	b := img.Bounds()
	w, h = b.Dx(), b.Dy()
	rgb = grow(buf, w*h*3)
	switch m := img.(type) {
	case *image.RGBA:
		copyRGBA(rgb, m.Pix, m.Stride, w, h)
	case *image.NRGBA:
		if !m.Opaque() {
			genericToRGB(rgb, img)
			break
		}
		copyRGBA(rgb, m.Pix, m.Stride, w, h)
	default:
		genericToRGB(rgb, img)
	}
	return rgb, w, h
}

func genericToRGB(rgb []uint8, img image.Image) {
	b := img.Bounds()
	i := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bb, _ := img.At(x, y).RGBA()
			rgb[i], rgb[i+1], rgb[i+2] = uint8(r>>8), uint8(g>>8), uint8(bb>>8)
			i += 3
		}
	}
}

func copyRGBA(rgb, pix []uint8, stride, w, h int) {
	for y := 0; y < h; y++ {
		row := pix[y*stride : y*stride+w*4]
		o := rgb[y*w*3 : (y+1)*w*3]
		for x := 0; x < w; x++ {
			o[3*x], o[3*x+1], o[3*x+2] = row[4*x], row[4*x+1], row[4*x+2]
		}
	}
}

// RGBToImage writes interleaved RGB into an opaque *image.NRGBA, reusing dst
// when its bounds match.
func RGBToImage(rgb []uint8, w, h int, dst *image.NRGBA) *image.NRGBA {
	if dst == nil || dst.Rect != image.Rect(0, 0, w, h) {
		dst = image.NewNRGBA(image.Rect(0, 0, w, h))
	}
	for y := 0; y < h; y++ {
		row := dst.Pix[y*dst.Stride : y*dst.Stride+w*4]
		in := rgb[y*w*3 : (y+1)*w*3]
		for x := 0; x < w; x++ {
			row[4*x], row[4*x+1], row[4*x+2], row[4*x+3] = in[3*x], in[3*x+1], in[3*x+2], 255
		}
	}
	return dst
}

// ApplyImage corrupts an image of any type and returns an opaque NRGBA.
func (c *Corruptor) ApplyImage(src image.Image, name string, severity int, seed uint64) (*image.NRGBA, error) {
	rgb, w, h := ImageToRGB(src, nil)
	if err := c.Apply(rgb, rgb, w, h, name, severity, seed); err != nil {
		return nil, err
	}
	return RGBToImage(rgb, w, h, nil), nil
}

// buf returns scratch plane i with n elements (contents undefined).
func (c *Corruptor) buf(i, n int) []float32 {
	if cap(c.f[i]) < n {
		c.f[i] = make([]float32, n)
	}
	c.f[i] = c.f[i][:n]
	return c.f[i]
}

func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}
