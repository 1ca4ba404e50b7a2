package offline

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/didoedge/didoedge/internal/plotpng"
)

// WriteOutputs writes the toy run's curve.csv, train.csv and toy.png into
// dir and returns their paths.
func (r *ToyResult) WriteOutputs(dir string) ([]string, error) {
	curve, train, png := filepath.Join(dir, "curve.csv"), filepath.Join(dir, "train.csv"), filepath.Join(dir, "toy.png")
	if err := writeToyFile(curve, r.WriteCurveCSV); err != nil {
		return nil, err
	}
	if err := writeToyFile(train, r.WriteTrainCSV); err != nil {
		return nil, err
	}
	if err := r.plot(png); err != nil {
		return nil, fmt.Errorf("plot %q: %w", png, err)
	}
	return []string{curve, train, png}, nil
}

// WriteSummary writes the run's figures: the OOD AUC of K/S outside the
// training region, and the mean Laplace scale (and, for set B, K/S) on the
// regions of different noise.
func (r *ToyResult) WriteSummary(w io.Writer) error {
	auc, err := r.OODAUC()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "epistemic K/S: AUC outside vs inside the training region %.4f\n", auc)
	if r.Dataset == ToyB {
		fmt.Fprintf(w, "mean K/S: %.4f on (-1,3), %.4f on [-3,-1], %.4f on [3,5]\n",
			r.MeanOn(r.Epistemic, -1, 3), r.MeanOn(r.Epistemic, -3, -1), r.MeanOn(r.Epistemic, 3, 5))
		fmt.Fprintf(w, "mean Laplace b: %.3f on [-3,-1] (noise std 1.73), %.3f on [3,5] (std 1)\n",
			r.MeanOn(r.Aleatoric, -3, -1), r.MeanOn(r.Aleatoric, 3, 5))
	} else {
		fmt.Fprintf(w, "mean Laplace b: %.3f on [-3,0] (noise std 1.73), %.3f on [0,3] (std 1)\n",
			r.MeanOn(r.Aleatoric, -3, 0), r.MeanOn(r.Aleatoric, 0, 3))
	}
	return nil
}

func writeToyFile(path string, write func(w io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %q: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	return nil
}

// plot draws two aligned panels: the data, the true mean, the prediction
// with a band of plus/minus the Laplace scale b; below, the DIDO epistemic
// K/S min-max normalized to 0..1 with the training regions shaded.
func (r *ToyResult) plot(path string) error {
	top := plot.New()
	top.Title.Text = fmt.Sprintf("Toy %s: y = 10 sin x + noise, main MLP and generalized AuxUE", r.Dataset)
	top.Y.Label.Text = "y"
	top.Legend.Top, top.Legend.Left = true, true
	n := len(r.GridX)
	band := make(plotter.XYs, 0, 2*n)
	pred, mean := make(plotter.XYs, n), make(plotter.XYs, n)
	for i, x := range r.GridX {
		band = append(band, plotter.XY{X: float64(x), Y: float64(r.Pred[i] + r.Aleatoric[i])})
		pred[i] = plotter.XY{X: float64(x), Y: float64(r.Pred[i])}
		mean[i] = plotter.XY{X: float64(x), Y: float64(r.Mean[i])}
	}
	for i := n - 1; i >= 0; i-- {
		band = append(band, plotter.XY{X: float64(r.GridX[i]), Y: float64(r.Pred[i] - r.Aleatoric[i])})
	}
	poly, err := plotter.NewPolygon(band)
	if err != nil {
		return err
	}
	poly.Color = color.NRGBA{R: 255, G: 160, B: 60, A: 110}
	poly.LineStyle.Width = 0
	pts := make(plotter.XYs, len(r.TrainX))
	for i := range r.TrainX {
		pts[i] = plotter.XY{X: float64(r.TrainX[i]), Y: float64(r.TrainY[i])}
	}
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return err
	}
	sc.GlyphStyle.Radius = vg.Points(1.2)
	sc.GlyphStyle.Shape = draw.CircleGlyph{}
	sc.GlyphStyle.Color = color.NRGBA{R: 90, G: 90, B: 90, A: 140}
	lp, err := plotter.NewLine(pred)
	if err != nil {
		return err
	}
	lp.LineStyle.Width, lp.LineStyle.Color = vg.Points(1.6), color.NRGBA{R: 30, G: 80, B: 200, A: 255}
	lm, err := plotter.NewLine(mean)
	if err != nil {
		return err
	}
	lm.LineStyle.Width, lm.LineStyle.Color = vg.Points(1), color.Black
	lm.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	top.Add(poly, sc, lm, lp)
	top.Legend.Add("training points", sc)
	top.Legend.Add("10 sin x", lm)
	top.Legend.Add("prediction", lp)
	top.Legend.Add("± Laplace scale b", poly)
	top.X.Min, top.X.Max = -7, 7
	lo, hi := -16.0, 16.0
	for _, p := range pts {
		lo, hi = math.Min(lo, p.Y-1), math.Max(hi, p.Y+1)
	}
	top.Y.Min, top.Y.Max = lo, hi

	bottom := plot.New()
	bottom.X.Label.Text = "x"
	bottom.Y.Label.Text = "epistemic K/S (normalized)"
	bottom.X.Min, bottom.X.Max, bottom.Y.Min, bottom.Y.Max = -7, 7, 0, 1.05
	minU, maxU := math.Inf(1), math.Inf(-1)
	for _, u := range r.Epistemic {
		minU, maxU = math.Min(minU, float64(u)), math.Max(maxU, float64(u))
	}
	span := maxU - minU
	if span == 0 {
		span = 1
	}
	epi := make(plotter.XYs, n)
	for i, x := range r.GridX {
		epi[i] = plotter.XY{X: float64(x), Y: (float64(r.Epistemic[i]) - minU) / span}
	}
	regions := [][2]float64{{-3, 3}}
	if r.Dataset == ToyB {
		regions = [][2]float64{{-3, -1}, {3, 5}}
	}
	for i, reg := range regions {
		shade, err := plotter.NewPolygon(plotter.XYs{{X: reg[0], Y: 0}, {X: reg[1], Y: 0}, {X: reg[1], Y: 1.05}, {X: reg[0], Y: 1.05}})
		if err != nil {
			return err
		}
		shade.Color, shade.LineStyle.Width = color.NRGBA{R: 120, G: 120, B: 120, A: 45}, 0
		bottom.Add(shade)
		if i == 0 {
			bottom.Legend.Add("training region", shade)
		}
	}
	le, err := plotter.NewLine(epi)
	if err != nil {
		return err
	}
	le.LineStyle.Width, le.LineStyle.Color = vg.Points(1.6), color.NRGBA{R: 200, G: 30, B: 40, A: 255}
	bottom.Add(le)
	bottom.Legend.Add(fmt.Sprintf("DIDO K/S (raw %.3g..%.3g)", minU, maxU), le)
	bottom.Legend.Top = true
	bottom.Legend.Left = true

	const w, h = 8 * vg.Inch, 7 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(10), PadY: vg.Points(10)}
	canvases := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, dc)
	top.Draw(canvases[0][0])
	bottom.Draw(canvases[1][0])
	return plotpng.Write(img, path)
}

// WriteToySeedTable writes the per-seed table of both toy sets (RunToySeeds
// rows, which took elapsed) as Markdown, with the counts of seeds that meet
// each claim.
func WriteToySeedTable(w io.Writer, cfg ToyConfig, rows []ToySeedRow, elapsed time.Duration) error {
	fmt.Fprintf(w, "toy, %d seeds, epochs x%g, %d training points (%s)\n", len(rows), cfg.EpochsScale, cfg.NTrain, elapsed.Round(time.Second))
	fmt.Fprintln(w, "| seed | A: AUC | A: left AUC (x < -3) | A: right AUC (x > 3) | both sides >= 0.9 | A: mean b [-3,0] / [0,3] | B: mean K/S gap (-1,3) / training | B: ratio |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	both, bigger, ratio2 := 0, 0, 0
	for _, r := range rows {
		mark := "no"
		if r.BothSides() {
			mark = "yes"
			both++
		}
		if r.BLeft > r.BRight {
			bigger++
		}
		if r.Ratio >= 2 {
			ratio2++
		}
		fmt.Fprintf(w, "| %d | %.3f | %.3f | %.3f | %s | %.2f / %.2f | %.4f / %.4f | %.2f |\n",
			r.Seed, r.AUC, r.LeftAUC, r.RightAUC, mark, r.BLeft, r.BRight, r.GapKS, r.TrainKS, r.Ratio)
	}
	fmt.Fprintf(w, "set A: both sides >= 0.9 on %d of %d seeds; larger b on the noisier side on %d of %d\n", both, len(rows), bigger, len(rows))
	fmt.Fprintf(w, "set B: gap K/S at least twice the training regions' on %d of %d seeds\n", ratio2, len(rows))
	return nil
}
