package dataset

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"io/fs"
	"math"
	"os"
)

// KITTIDepthScale is KITTI's depth PNG scale: value = metres * 256.
const KITTIDepthScale = 256

// maxPixels bounds the size a PNG header may announce before we decode it.
const maxPixels = 64 << 20

var errNotPNG = errors.New("not a PNG file")

func decodeConfig(data []byte) (image.Config, error) {
	if len(data) < 8 || !bytes.Equal(data[:8], []byte("\x89PNG\r\n\x1a\n")) {
		return image.Config{}, errNotPNG
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return cfg, err
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > maxPixels {
		return cfg, fmt.Errorf("image size %dx%d out of range", cfg.Width, cfg.Height)
	}
	return cfg, nil
}

func decodePNG(data []byte) (image.Image, error) {
	if _, err := decodeConfig(data); err != nil {
		return nil, err
	}
	return png.Decode(bytes.NewReader(data))
}

// EncodeRGBPNG writes an 8-bit RGB PNG.
func EncodeRGBPNG(w io.Writer, width, height int, rgb []uint8) error {
	if width <= 0 || height <= 0 || len(rgb) != width*height*3 {
		return fmt.Errorf("encode rgb png: %d bytes for %dx%d", len(rgb), width, height)
	}
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	for i, j := 0, 0; i < len(rgb); i, j = i+3, j+4 {
		img.Pix[j], img.Pix[j+1], img.Pix[j+2], img.Pix[j+3] = rgb[i], rgb[i+1], rgb[i+2], 255
	}
	return fastEncoder().Encode(w, img)
}

func fastEncoder() *png.Encoder { return &png.Encoder{CompressionLevel: png.BestSpeed} }

// DecodeRGBPNG decodes an RGB(A), grey or paletted PNG into interleaved RGB.
func DecodeRGBPNG(data []byte) (width, height int, rgb []uint8, err error) {
	img, err := decodePNG(data)
	if err != nil {
		return 0, 0, nil, err
	}
	b := img.Bounds()
	width, height = b.Dx(), b.Dy()
	rgb = make([]uint8, width*height*3)
	switch m := img.(type) {
	case *image.RGBA:
		copyRGB(rgb, m.Pix, m.Stride, width, height)
	case *image.NRGBA:
		copyRGB(rgb, m.Pix, m.Stride, width, height)
	default:
		i := 0
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				r, g, bl, _ := img.At(x, y).RGBA()
				rgb[i], rgb[i+1], rgb[i+2] = uint8(r>>8), uint8(g>>8), uint8(bl>>8)
				i += 3
			}
		}
	}
	return width, height, rgb, nil
}

func copyRGB(dst, pix []uint8, stride, w, h int) {
	for y := 0; y < h; y++ {
		row := pix[y*stride : y*stride+4*w]
		d := dst[3*w*y : 3*w*(y+1)]
		for x := 0; x < w; x++ {
			d[3*x], d[3*x+1], d[3*x+2] = row[4*x], row[4*x+1], row[4*x+2]
		}
	}
}

// QuantizeDepth returns the 16-bit value EncodeDepthPNG stores for metres
// d: round(d*scale), clamped to 65535; 0 for non-positive, NaN or +Inf
// values (no ground truth).
func QuantizeDepth(d float32, scale float64) uint16 {
	if !(d > 0) || math.IsInf(float64(d), 1) {
		return 0
	}
	q := math.Round(float64(d) * scale)
	if q > 65535 {
		return 65535
	}
	return uint16(q)
}

// EncodeDepthPNG writes depth in metres as a 16-bit grey PNG of
// QuantizeDepth values.
func EncodeDepthPNG(w io.Writer, width, height int, depth []float32, scale float64) error {
	if width <= 0 || height <= 0 || len(depth) != width*height {
		return fmt.Errorf("encode depth png: %d values for %dx%d", len(depth), width, height)
	}
	if !(scale > 0) {
		return fmt.Errorf("encode depth png: scale %v must be positive", scale)
	}
	img := image.NewGray16(image.Rect(0, 0, width, height))
	for i, d := range depth {
		q := QuantizeDepth(d, scale)
		img.Pix[2*i], img.Pix[2*i+1] = uint8(q>>8), uint8(q)
	}
	return fastEncoder().Encode(w, img)
}

// DecodeDepthPNG decodes a 16-bit grey depth PNG into metres (value/scale;
// 0 stays 0). Any other pixel format is an error: an 8-bit map would
// silently lose the metric scale.
func DecodeDepthPNG(data []byte, scale float64) (width, height int, depth []float32, err error) {
	if !(scale > 0) {
		return 0, 0, nil, fmt.Errorf("depth scale %v must be positive", scale)
	}
	img, err := decodePNG(data)
	if err != nil {
		return 0, 0, nil, err
	}
	g, ok := img.(*image.Gray16)
	if !ok {
		return 0, 0, nil, fmt.Errorf("depth PNG must be 16-bit greyscale, got %T", img)
	}
	b := g.Bounds()
	width, height = b.Dx(), b.Dy()
	depth = make([]float32, width*height)
	inv := 1 / scale
	for y := 0; y < height; y++ {
		row := g.Pix[y*g.Stride:]
		for x := 0; x < width; x++ {
			q := uint16(row[2*x])<<8 | uint16(row[2*x+1])
			depth[y*width+x] = float32(float64(q) * inv)
		}
	}
	return width, height, depth, nil
}

// EncodeLabelPNG writes 8-bit class ids as a grey PNG.
func EncodeLabelPNG(w io.Writer, width, height int, labels []uint8) error {
	if width <= 0 || height <= 0 || len(labels) != width*height {
		return fmt.Errorf("encode label png: %d labels for %dx%d", len(labels), width, height)
	}
	img := &image.Gray{Pix: labels, Stride: width, Rect: image.Rect(0, 0, width, height)}
	return fastEncoder().Encode(w, img)
}

// DecodeLabelPNG decodes an 8-bit grey label PNG.
func DecodeLabelPNG(data []byte) (width, height int, labels []uint8, err error) {
	img, err := decodePNG(data)
	if err != nil {
		return 0, 0, nil, err
	}
	g, ok := img.(*image.Gray)
	if !ok {
		return 0, 0, nil, fmt.Errorf("label PNG must be 8-bit greyscale, got %T", img)
	}
	b := g.Bounds()
	width, height = b.Dx(), b.Dy()
	labels = make([]uint8, width*height)
	for y := 0; y < height; y++ {
		copy(labels[y*width:(y+1)*width], g.Pix[y*g.Stride:y*g.Stride+width])
	}
	return width, height, labels, nil
}

// readRGB, readDepth and readLabels read the file name of fsys (the data
// set rooted at root) and name it in errors.
func readRGB(fsys fs.FS, root, name string) (int, int, []uint8, error) {
	data, err := readFile(fsys, root, name)
	if err != nil {
		return 0, 0, nil, err
	}
	w, h, rgb, err := DecodeRGBPNG(data)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("read image %q: %w", display(root, name), err)
	}
	return w, h, rgb, nil
}

func readDepth(fsys fs.FS, root, name string, scale float64) (int, int, []float32, error) {
	data, err := readFile(fsys, root, name)
	if err != nil {
		return 0, 0, nil, err
	}
	w, h, d, err := DecodeDepthPNG(data, scale)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("read depth %q: %w", display(root, name), err)
	}
	return w, h, d, nil
}

func readLabels(fsys fs.FS, root, name string) (int, int, []uint8, error) {
	data, err := readFile(fsys, root, name)
	if err != nil {
		return 0, 0, nil, err
	}
	w, h, l, err := DecodeLabelPNG(data)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("read labels %q: %w", display(root, name), err)
	}
	return w, h, l, nil
}

// writeFileAtomic writes via a temporary file in tmpDir and a rename, so a
// cancelled or killed run never leaves a truncated file under the final name
// nor a stray temporary file beside the frames (image_02/data holds RGB
// frames only).
func writeFileAtomic(tmpDir, path string, encode func(io.Writer) error) error {
	f, err := os.CreateTemp(tmpDir, "part-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if err := encode(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %q: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %q: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %q: %w", path, err)
	}
	return nil
}
