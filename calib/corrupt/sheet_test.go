package corrupt

import (
	"image"
	"image/png"
	"os"
	"testing"
)

// TestContactSheet writes a contact sheet (one row per corruption, clean
// frame then severities 1..5) when CORRUPT_CONTACT_SHEET names a PNG path:
//
//	CORRUPT_CONTACT_SHEET=/tmp/corruptions.png go test -run ContactSheet ./calib/corrupt
func TestContactSheet(t *testing.T) {
	path := os.Getenv("CORRUPT_CONTACT_SHEET")
	if path == "" {
		t.Skip("set CORRUPT_CONTACT_SHEET=/path/sheet.png to write the contact sheet")
	}
	const w, h, gap = 320, 96, 4
	src := roadScene(w, h)
	names := Names()
	sheet := image.NewNRGBA(image.Rect(0, 0, 6*(w+gap), len(names)*(h+gap)))
	c := NewCorruptor()
	out := make([]uint8, len(src))
	put := func(rgb []uint8, col, row int) {
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				i := (y*w + x) * 3
				o := sheet.PixOffset(col*(w+gap)+x, row*(h+gap)+y)
				copy(sheet.Pix[o:o+3], rgb[i:i+3])
				sheet.Pix[o+3] = 255
			}
		}
	}
	for row, name := range names {
		put(src, 0, row)
		for s := 1; s <= MaxSeverity; s++ {
			if err := c.Apply(out, src, w, h, name, s, 1); err != nil {
				t.Fatal(err)
			}
			put(out, s, row)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, sheet); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (rows: %v)", path, names)
}
