package infer

import "fmt"

// SetImageRGB8 writes an interleaved RGB8 image (row stride in bytes) into
// the image input: x = p*range/255 - mean[c]) / std[c] in the spec's channel
// order (rgb or bgr), planar (NCHW) or interleaved (NHWC). The image must
// already have the spec's size.
func (s *Session) SetImageRGB8(pix []byte, width, height, stride int) error {
	in := s.spec.Input
	if s.spec.IsAuxUE() && !s.spec.OwnsInputs() {
		return fmt.Errorf("model %q: input %q is an AuxUE features input, not an image", s.path, in.Name)
	}
	if width != in.Width || height != in.Height {
		return fmt.Errorf("model %q: image is %dx%d, input %q wants %dx%d", s.path, width, height, in.Name, in.Width, in.Height)
	}
	if stride < 3*width || len(pix) < (height-1)*stride+3*width {
		return fmt.Errorf("model %q: image buffer of %d bytes (stride %d) is too small for %dx%d RGB", s.path, len(pix), stride, width, height)
	}
	return s.imageInto(s.Input(), pix, width, height, stride)
}

// ImageInto is SetImageRGB8 into dst (one frame of the image input, e.g.
// a frame staged off the inference goroutine): it reads only the spec, so
// it may run while the session runs.
func (s *Session) ImageInto(dst []float32, pix []byte, width, height, stride int) error {
	in := s.spec.Input
	if s.spec.IsAuxUE() && !s.spec.OwnsInputs() {
		return fmt.Errorf("model %q: input %q is an AuxUE features input, not an image", s.path, in.Name)
	}
	if width != in.Width || height != in.Height || len(dst) != s.inPer[0] {
		return fmt.Errorf("model %q: image is %dx%d into %d values, input %q wants %dx%d", s.path, width, height, len(dst), in.Name, in.Width, in.Height)
	}
	if stride < 3*width || len(pix) < (height-1)*stride+3*width {
		return fmt.Errorf("model %q: image buffer of %d bytes (stride %d) is too small for %dx%d RGB", s.path, len(pix), stride, width, height)
	}
	return s.imageInto(dst, pix, width, height, stride)
}

func (s *Session) imageInto(dst []float32, pix []byte, width, height, stride int) error {
	if s.spec.channels() == 1 {
		greyInto(s.pixels, pix, width, height, stride, dst)
		return nil
	}
	NormalizeRGB8(s.pixels, s.spec.Layout() == LayoutNHWC, pix, width, height, stride, dst)
	return nil
}

// greyInto writes the luma 0.299 R + 0.587 G + 0.114 B (ITU-R BT.601) of
// each pixel through channel 0 of t.
func greyInto(t PixelTransform, pix []byte, width, height, stride int, dst []float32) {
	for y := range height {
		row := pix[y*stride : y*stride+3*width]
		for x := range width {
			p := row[3*x : 3*x+3 : 3*x+3]
			l := 0.299*float32(p[0]) + 0.587*float32(p[1]) + 0.114*float32(p[2])
			dst[y*width+x] = l*t.Gain[0] + t.Offset[0]
		}
	}
}

// NormalizeRGB8 writes an interleaved RGB8 image into dst (3*width*height
// values) through the pixel transform t, planar or interleaved (nhwc).
func NormalizeRGB8(t PixelTransform, nhwc bool, pix []byte, width, height, stride int, dst []float32) {
	g0, g1, g2 := t.Gain[0], t.Gain[1], t.Gain[2]
	o0, o1, o2 := t.Offset[0], t.Offset[1], t.Offset[2]
	i0, i1, i2 := t.Order[0], t.Order[1], t.Order[2]
	plane := width * height
	for y := range height {
		row := pix[y*stride : y*stride+3*width]
		o := y * width
		for x := range width {
			p := row[3*x : 3*x+3 : 3*x+3]
			a := float32(p[i0])*g0 + o0
			b := float32(p[i1])*g1 + o1
			c := float32(p[i2])*g2 + o2
			if nhwc {
				d := dst[3*(o+x) : 3*(o+x)+3 : 3*(o+x)+3]
				d[0], d[1], d[2] = a, b, c
			} else {
				dst[o+x], dst[plane+o+x], dst[2*plane+o+x] = a, b, c
			}
		}
	}
}
