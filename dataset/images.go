package dataset

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// LayoutImages is a plain folder of pictures (.png, .jpg, .jpeg at its top
// level, symbolic links followed) without ground truth: footage from a new
// camera, photographs. It has no splits: every split name (train, val,
// test, all) selects all its pictures, in name order.
const LayoutImages = "images"

// ImagesDrive is the drive name of a picture folder's items.
const ImagesDrive = "images"

// IsImageName reports whether name has a picture extension the images
// layout reads (.png, .jpg, .jpeg, any case).
func IsImageName(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".png", ".jpg", ".jpeg":
		return true
	}
	return false
}

// listImages returns the names of the regular files (after following
// links) with a picture extension at the top of fsys, sorted.
func listImages(fsys fs.FS) ([]string, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !IsImageName(e.Name()) {
			continue
		}
		// fs.Stat follows a symbolic link (os.DirFS): a linked picture
		// counts, a link to a directory or a dangling link does not.
		st, err := fs.Stat(fsys, e.Name())
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names, nil
}

// hasImages reports whether fsys holds a picture at its top level.
func hasImages(fsys fs.FS) bool {
	names, err := listImages(fsys)
	return err == nil && len(names) > 0
}

type imagesSet struct {
	dir   string
	fsys  fs.FS
	names []string
}

func openImages(fsys fs.FS, dir string) (*imagesSet, error) {
	names, err := listImages(fsys)
	if err != nil {
		return nil, fmt.Errorf("image folder %s: %w", dir, unwrapPath(err))
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("image folder %q: no .png, .jpg or .jpeg file at its top level", dir)
	}
	return &imagesSet{dir: dir, fsys: fsys, names: names}, nil
}

func (s *imagesSet) Layout() string { return LayoutImages }

// HasGroundTruth: a picture folder has none.
func (s *imagesSet) HasGroundTruth() bool { return false }

func (s *imagesSet) Items(split string) ([]Item, error) {
	if split != SplitAll && !isSplit(split) {
		return nil, fmt.Errorf("image folder %q: split %q: a picture folder has no split files (give all, train, val or test: each selects every picture)", s.dir, split)
	}
	out := make([]Item, len(s.names))
	for i, n := range s.names {
		out[i] = Item{Drive: ImagesDrive, Frame: i, Side: 'l', RGBPath: n}
	}
	return out, nil
}

func (s *imagesSet) Load(it Item) (*Sample, error) {
	if it.Drive != ImagesDrive || it.Frame < 0 || it.Frame >= len(s.names) || s.names[it.Frame] != it.RGBPath {
		return nil, fmt.Errorf("image folder %q: item %s/%d (%q) is not one of its pictures", s.dir, it.Drive, it.Frame, it.RGBPath)
	}
	data, err := readFile(s.fsys, s.dir, it.RGBPath)
	if err != nil {
		return nil, err
	}
	w, h, rgb, err := DecodeRGBImage(data)
	if err != nil {
		return nil, fmt.Errorf("read image %q: %w", display(s.dir, it.RGBPath), err)
	}
	return &Sample{Drive: ImagesDrive, Frame: it.Frame, Name: display(s.dir, it.RGBPath), Width: w, Height: h, RGB: rgb}, nil
}

var errNotImage = errors.New("neither a PNG nor a JPEG file")

// DecodeRGBImage decodes a PNG or a JPEG into interleaved RGB8. The size
// its header announces is checked (at most 64 Mi pixels) before any pixel
// is decoded.
func DecodeRGBImage(data []byte) (width, height int, rgb []uint8, err error) {
	if len(data) >= 8 && bytes.Equal(data[:8], []byte("\x89PNG\r\n\x1a\n")) {
		return DecodeRGBPNG(data)
	}
	if len(data) < 3 || data[0] != 0xFF || data[1] != 0xD8 || data[2] != 0xFF {
		return 0, 0, nil, errNotImage
	}
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return 0, 0, nil, err
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > maxPixels {
		return 0, 0, nil, fmt.Errorf("image size %dx%d out of range", cfg.Width, cfg.Height)
	}
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		return 0, 0, nil, err
	}
	b := img.Bounds()
	width, height = b.Dx(), b.Dy()
	rgb = make([]uint8, 3*width*height)
	switch m := img.(type) {
	case *image.YCbCr:
		i := 0
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				yi, ci := m.YOffset(x, y), m.COffset(x, y)
				rgb[i], rgb[i+1], rgb[i+2] = color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
				i += 3
			}
		}
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
