package dataset

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeRGBPNGFile(t *testing.T, path string, w, h int, rgb []uint8) {
	t.Helper()
	var b bytes.Buffer
	if err := EncodeRGBPNG(&b, w, h, rgb); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func uniformJPEG(t *testing.T, w, h int, c color.RGBA) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, 255
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 100}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestImagesLayout: a folder of pictures opens as the images layout
// (auto-detected), lists its PNG, its JPEG and a symbolically linked
// picture in name order for every split name, skips other files, a link
// to a directory and a dangling link, and loads pictures without ground
// truth.
func TestImagesLayout(t *testing.T) {
	dir := t.TempDir()
	rgb := make([]uint8, 3*4*2)
	for i := range rgb {
		rgb[i] = uint8(10 * i)
	}
	writeRGBPNGFile(t, filepath.Join(dir, "a.png"), 4, 2, rgb)
	if err := os.WriteFile(filepath.Join(dir, "b.JPG"), uniformJPEG(t, 16, 8, color.RGBA{200, 120, 40, 255}), 0o644); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	writeRGBPNGFile(t, filepath.Join(other, "linked.png"), 4, 2, rgb)
	for _, l := range []struct{ target, name string }{
		{filepath.Join(other, "linked.png"), "c.png"},
		{other, "d.png"}, // a directory
		{filepath.Join(other, "gone.png"), "e.png"}, // dangling
	} {
		if err := os.Symlink(l.target, filepath.Join(dir, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ds, err := Open(Source{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Layout() != LayoutImages || ds.HasGroundTruth() {
		t.Fatalf("layout %q, ground truth %v; want images without", ds.Layout(), ds.HasGroundTruth())
	}
	for _, split := range []string{"val", SplitAll, "train"} {
		items, err := ds.Items(split)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, it := range items {
			names = append(names, it.RGBPath)
		}
		if strings.Join(names, " ") != "a.png b.JPG c.png" {
			t.Fatalf("split %s: pictures %v, want a.png b.JPG c.png", split, names)
		}
	}
	items, _ := ds.Items("val")
	s, err := ds.Load(items[2])
	if err != nil {
		t.Fatal(err)
	}
	if s.Width != 4 || s.Height != 2 || !bytes.Equal(s.RGB, rgb) || s.Sparse != nil || !strings.HasSuffix(s.Name, "c.png") {
		t.Fatalf("linked picture loaded as %dx%d %v sparse %v name %q", s.Width, s.Height, s.RGB, s.Sparse, s.Name)
	}
	// a uniform JPEG at quality 100 decodes to its colour within the
	// rounding of the YCbCr conversion
	s, err = ds.Load(items[1])
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(s.RGB); i += 3 {
		for k, want := range []int{200, 120, 40} {
			if d := int(s.RGB[i+k]) - want; d < -2 || d > 2 {
				t.Fatalf("JPEG pixel %d channel %d = %d, want %d", i/3, k, s.RGB[i+k], want)
			}
		}
	}
	if _, err := ds.Items("splits/val.txt"); err == nil || !strings.Contains(err.Error(), "no split files") {
		t.Fatalf("split file on a picture folder: %v", err)
	}
	if _, err := Open(Source{Dir: t.TempDir(), Layout: LayoutImages}); err == nil || !strings.Contains(err.Error(), "no .png, .jpg or .jpeg") {
		t.Fatalf("empty picture folder: %v", err)
	}
}

func TestDecodeRGBImageRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"text", []byte("hello"), "neither a PNG nor a JPEG"},
		{"truncated jpeg", []byte{0xFF, 0xD8, 0xFF, 0xE0, 0}, ""},
	} {
		if _, _, _, err := DecodeRGBImage(c.data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
}

func FuzzDecodeRGBImage(f *testing.F) {
	var b bytes.Buffer
	_ = EncodeRGBPNG(&b, 2, 2, make([]uint8, 12))
	f.Add(b.Bytes())
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	b.Reset()
	_ = jpeg.Encode(&b, img, nil)
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		w, h, rgb, err := DecodeRGBImage(data)
		if err == nil && (w <= 0 || h <= 0 || len(rgb) != 3*w*h) {
			t.Fatalf("decoded %dx%d with %d bytes", w, h, len(rgb))
		}
	})
}
