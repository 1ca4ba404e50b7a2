package plotpng

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// TestSaveLegendRight writes a plot with a legend and decodes the PNG: its
// size is the canvas's at vgimg's default 96 dpi (5 x 2 inches: 480 x 192
// pixels), and the legend column on the right is not blank.
func TestSaveLegendRight(t *testing.T) {
	p := plot.New()
	l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
	if err != nil {
		t.Fatal(err)
	}
	p.Add(l)
	p.Legend.Add("a long legend entry", l)
	path := filepath.Join(t.TempDir(), "p.png")
	if err := SaveLegendRight(p, path, 5*vg.Inch, 2*vg.Inch, 1.5*vg.Inch); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 480 || b.Dy() != 192 {
		t.Fatalf("PNG %v, want 480x192", b)
	}
	dark := 0
	for y := 0; y < 192; y++ {
		for x := 480 - 144 + 8; x < 480; x++ { // the legend column (1.5 in = 144 px)
			if r, _, _, _ := img.At(x, y).RGBA(); r < 0x8000 {
				dark++
			}
		}
	}
	if dark == 0 {
		t.Fatal("the legend column is blank")
	}
	if err := SaveLegendRight(p, filepath.Join(t.TempDir(), "no", "such", "dir.png"), vg.Inch, vg.Inch, vg.Inch/2); err == nil {
		t.Fatal("a path in a missing directory was accepted")
	}
}
