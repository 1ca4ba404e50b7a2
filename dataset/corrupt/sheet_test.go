package corrupt

import (
	"fmt"
	"image"
	"image/png"
	"os"
	"strings"
	"testing"
)

// TestContactSheet writes a contact sheet (one row per corruption, clean
// frame then severities 1..5) when CORRUPT_CONTACT_SHEET names a PNG path
// (CORRUPT_CONTACT_ROWS=snow,frost limits the rows, CORRUPT_CONTACT_SIZE=640x192
// sets the frame size):
//
//	CORRUPT_CONTACT_SHEET=/tmp/corruptions.png go test -run ContactSheet ./dataset/corrupt
func TestContactSheet(t *testing.T) {
	path := os.Getenv("CORRUPT_CONTACT_SHEET")
	if path == "" {
		t.Skip("set CORRUPT_CONTACT_SHEET=/path/sheet.png to write the contact sheet")
	}
	const gap = 4
	w, h := 320, 96
	if sz := os.Getenv("CORRUPT_CONTACT_SIZE"); sz != "" { // e.g. 640x192
		if _, err := fmt.Sscanf(sz, "%dx%d", &w, &h); err != nil || w <= 0 || h <= 0 {
			t.Fatalf("CORRUPT_CONTACT_SIZE=%q: want WxH", sz)
		}
	}
	src := roadScene(w, h)
	names := Names()
	if rows := os.Getenv("CORRUPT_CONTACT_ROWS"); rows != "" {
		names = strings.Split(rows, ",")
	}
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
