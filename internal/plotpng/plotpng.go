package plotpng

import (
	"fmt"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// SaveLegendRight draws p on a w x h canvas with its legend moved into a
// column legendW wide on the right, and writes the PNG to path. p's legend
// is taken out of p.
func SaveLegendRight(p *plot.Plot, path string, w, h, legendW vg.Length) error {
	leg := p.Legend
	p.Legend = plot.NewLegend()
	img := vgimg.New(w, h)
	dc := draw.New(img)
	p.Draw(draw.Crop(dc, 0, -legendW, 0, 0))
	leg.Top, leg.Left = true, true
	leg.YOffs = -vg.Points(20)
	leg.Draw(draw.Crop(dc, w-legendW+vg.Points(8), 0, 0, 0))
	return Write(img, path)
}

// Write writes a drawn canvas to path as PNG.
func Write(img *vgimg.Canvas, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("save plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("save plot %q: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save plot %q: %w", path, err)
	}
	return nil
}
