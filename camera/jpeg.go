package camera

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
)

// DecodeJPEG decodes a baseline JPEG into dst (grown when too small) as
// interleaved RGB24. image/jpeg allocates its own planes per call; the RGB
// destination is reused.
func DecodeJPEG(data []byte, dst []uint8) ([]uint8, int, int, error) {
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		return dst, 0, 0, fmt.Errorf("decode jpeg of %d bytes: %w", len(data), err)
	}
	dst, w, h := ImageToRGB(img, dst)
	return dst, w, h, nil
}

// ImageToRGB converts img into dst (grown when too small) as interleaved
// RGB24 and returns it with the image size. YCbCr (any subsampling), Gray,
// RGBA and NRGBA have direct loops; other models go through color.Model.
func ImageToRGB(img image.Image, dst []uint8) ([]uint8, int, int) {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	dst = growRGB(dst, w*h*3)
	switch m := img.(type) {
	case *image.YCbCr:
		ycbcrToRGB(m, dst)
	case *image.Gray:
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride : y*m.Stride+w]
			out := dst[y*w*3 : (y+1)*w*3]
			for x, v := range row {
				out[3*x], out[3*x+1], out[3*x+2] = v, v, v
			}
		}
	case *image.RGBA:
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride : y*m.Stride+4*w]
			out := dst[y*w*3 : (y+1)*w*3]
			for x := 0; x < w; x++ {
				out[3*x], out[3*x+1], out[3*x+2] = row[4*x], row[4*x+1], row[4*x+2]
			}
		}
	case *image.NRGBA:
		// Opaque images are the common case; alpha is composited over black.
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride : y*m.Stride+4*w]
			out := dst[y*w*3 : (y+1)*w*3]
			for x := 0; x < w; x++ {
				a := uint32(row[4*x+3])
				out[3*x] = uint8(uint32(row[4*x]) * a / 255)
				out[3*x+1] = uint8(uint32(row[4*x+1]) * a / 255)
				out[3*x+2] = uint8(uint32(row[4*x+2]) * a / 255)
			}
		}
	default:
		i := 0
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
				dst[i], dst[i+1], dst[i+2] = c.R, c.G, c.B
				i += 3
			}
		}
	}
	return dst, w, h
}

// chromaShift gives the horizontal and vertical chroma subsampling of r as
// right shifts of the luma coordinates.
func chromaShift(r image.YCbCrSubsampleRatio) (sx, sy uint) {
	switch r {
	case image.YCbCrSubsampleRatio422:
		return 1, 0
	case image.YCbCrSubsampleRatio420:
		return 1, 1
	case image.YCbCrSubsampleRatio440:
		return 0, 1
	case image.YCbCrSubsampleRatio411:
		return 2, 0
	case image.YCbCrSubsampleRatio410:
		return 2, 1
	}
	return 0, 0
}

// ycbcrToRGB is color.YCbCrToRGB (JFIF full-range BT.601, 16.16 fixed point)
// unrolled over the planes, so it matches the standard library bit for bit.
func ycbcrToRGB(m *image.YCbCr, dst []uint8) {
	w, h := m.Rect.Dx(), m.Rect.Dy()
	sx, sy := chromaShift(m.SubsampleRatio)
	for y := 0; y < h; y++ {
		yrow := m.Y[y*m.YStride : y*m.YStride+w]
		crow := (y >> sy) * m.CStride
		cb := m.Cb[crow:]
		cr := m.Cr[crow:]
		out := dst[y*w*3 : (y+1)*w*3]
		for x, yv := range yrow {
			ci := x >> sx
			yy := int32(yv) * 0x10101
			cb1 := int32(cb[ci]) - 128
			cr1 := int32(cr[ci]) - 128
			out[3*x] = clamp16(yy + 91881*cr1)
			out[3*x+1] = clamp16(yy - 22554*cb1 - 46802*cr1)
			out[3*x+2] = clamp16(yy + 116130*cb1)
		}
	}
}

func clamp16(v int32) uint8 {
	if uint32(v)&0xff000000 == 0 {
		return uint8(v >> 16)
	}
	return uint8(^(v >> 31))
}
