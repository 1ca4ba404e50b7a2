package protocol

import (
	"fmt"
	"image/color"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/didoedge/didoedge/internal/plotpng"
)

// rocPR computes the ROC (FPR, TPR) and precision-recall curves of scores
// (higher = positive), thinned to at most maxPts points each. Ties are
// stepped through as one threshold.
func rocPR(scores []float32, labels []bool, maxPts int) (roc, pr plotter.XYs) {
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return scores[idx[a]] > scores[idx[b]] })
	var P, N float64
	for _, l := range labels {
		if l {
			P++
		} else {
			N++
		}
	}
	if P == 0 || N == 0 {
		return nil, nil
	}
	every := max(1, len(idx)/maxPts)
	roc = append(roc, plotter.XY{X: 0, Y: 0})
	var tp, fp float64
	for k := 0; k < len(idx); k++ {
		if labels[idx[k]] {
			tp++
		} else {
			fp++
		}
		last := k == len(idx)-1 || scores[idx[k+1]] != scores[idx[k]]
		if last && (k%every == 0 || k == len(idx)-1) {
			roc = append(roc, plotter.XY{X: fp / N, Y: tp / P})
			if tp+fp > 0 {
				pr = append(pr, plotter.XY{X: tp / P, Y: tp / (tp + fp)})
			}
		}
	}
	return roc, pr
}

// palette holds 10 distinguishable colours (Tableau 10); later series are dashed.
var palette = []color.Color{
	color.NRGBA{31, 119, 180, 255}, color.NRGBA{255, 127, 14, 255}, color.NRGBA{44, 160, 44, 255},
	color.NRGBA{214, 39, 40, 255}, color.NRGBA{148, 103, 189, 255}, color.NRGBA{140, 86, 75, 255},
	color.NRGBA{227, 119, 194, 255}, color.NRGBA{127, 127, 127, 255}, color.NRGBA{188, 189, 34, 255},
	color.NRGBA{23, 190, 207, 255},
}

// savePlot draws p with its legend in a column right of the data area, so
// that no curve hides under it, and writes a PNG.
func savePlot(p *plot.Plot, path string) error {
	return plotpng.SaveLegendRight(p, path, 7.5*vg.Inch, 4*vg.Inch, 1.6*vg.Inch)
}

func addLine(p *plot.Plot, i int, name string, xy plotter.XYs) error {
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l.LineStyle.Color = palette[i%len(palette)]
	l.LineStyle.Dashes = plotutil.Dashes(i / len(palette))
	l.LineStyle.Width = vg.Points(1.3)
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// writePlots writes the PNGs into dir and returns their file names.
func writePlots(dir string, r *Results, cv *Curves) ([]string, error) {
	var files []string
	save := func(p *plot.Plot, name string) error {
		files = append(files, name)
		return savePlot(p, filepath.Join(dir, name))
	}
	if cv != nil && len(cv.Fractions) > 0 {
		p := plot.New()
		p.Title.Text = "Sparsification (RMSE), clean test frames, first seed"
		p.X.Label.Text = "fraction of pixels removed"
		p.Y.Label.Text = "RMSE of the kept pixels (m)"
		i := 0
		for _, m := range cv.MethodOrder {
			c, ok := cv.Spars[m]
			if !ok || !isTableTwoMethod(m) && m != "dido_sep" {
				continue
			}
			xy := make(plotter.XYs, len(c))
			for k := range c {
				xy[k] = plotter.XY{X: cv.Fractions[k], Y: c[k]}
			}
			if err := addLine(p, i, m, xy); err != nil {
				return nil, err
			}
			i++
		}
		if cv.OracleMain != nil {
			xy := make(plotter.XYs, len(cv.OracleMain))
			for k := range xy {
				xy[k] = plotter.XY{X: cv.Fractions[k], Y: cv.OracleMain[k]}
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return nil, err
			}
			l.LineStyle.Color = color.Black
			l.LineStyle.Width = vg.Points(2)
			p.Add(l)
			p.Legend.Add("oracle", l)
		}
		p.Legend.Top = true
		if err := save(p, "sparsification_rmse.png"); err != nil {
			return nil, err
		}
		roc, pr := plot.New(), plot.New()
		roc.Title.Text, pr.Title.Text = "Sky vs ground-truth pixels: ROC (clean, first seed)", "Sky vs ground-truth pixels: precision-recall"
		roc.X.Label.Text, roc.Y.Label.Text = "false positive rate", "true positive rate"
		pr.X.Label.Text, pr.Y.Label.Text = "recall", "precision"
		i = 0
		for _, m := range cv.MethodOrder {
			if !isSkyMethod(m) {
				continue
			}
			a, b := rocPR(cv.SkyScores[m], cv.SkyLabels[m], 300)
			if a == nil {
				continue
			}
			if err := addLine(roc, i, m, a); err != nil {
				return nil, err
			}
			if err := addLine(pr, i, m, b); err != nil {
				return nil, err
			}
			i++
		}
		roc.Legend.Left, roc.Legend.Top = false, false
		pr.Legend.Left, pr.Legend.Top = true, false
		if err := save(roc, "roc_sky.png"); err != nil {
			return nil, err
		}
		if err := save(pr, "pr_sky.png"); err != nil {
			return nil, err
		}
	}
	// Each metric against severity (S = 0 clean, S > 0 mean over corruptions).
	for _, spec := range []struct{ exp, metric string }{
		{ExpMainTask, "absrel"}, {ExpMainTask, "rmse"},
		{ExpAleatoric, "ause_rel"}, {ExpAleatoric, "ause_rmse"}, {ExpAleatoric, "aurg_rel"}, {ExpAleatoric, "aurg_rmse"}, {ExpAleatoric, "uce"},
		{ExpSky, "auc"}, {ExpSky, "aupr"}, {ExpSky, "sky_all"},
	} {
		series := map[string]plotter.XYs{}
		var order []string
		for _, x := range r.Runs {
			if x.Experiment != spec.exp || x.Metric != spec.metric || !(x.Corruption == CorrClean || x.Corruption == CorrMean) {
				continue
			}
			if spec.exp == ExpAleatoric && !isTableTwoMethod(x.Method) && x.Method != "dido_sep" {
				continue
			}
			if spec.exp == ExpSky && !isSkyMethod(x.Method) {
				continue
			}
			if _, ok := series[x.Method]; !ok {
				order = append(order, x.Method)
			}
			series[x.Method] = append(series[x.Method], plotter.XY{X: float64(x.Severity), Y: x.Mean})
		}
		if len(order) == 0 {
			continue
		}
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: %s against severity (mean over corruptions, %s seeds)", spec.exp, spec.metric, seedsOf(r))
		p.X.Label.Text = "severity S (0 = clean)"
		p.Y.Label.Text = spec.metric
		for i, m := range order {
			xy := series[m]
			sort.Slice(xy, func(a, b int) bool { return xy[a].X < xy[b].X })
			if err := addLine(p, i, m, xy); err != nil {
				return nil, err
			}
		}
		p.Legend.Top = true
		p.Legend.Left = spec.metric == "auc" || spec.metric == "aupr"
		if spec.metric == "uce" {
			// A head whose scale read-out explodes (GGau with a small shape) spans decades.
			p.Y.Scale = plot.LogScale{}
			p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
			p.Y.Label.Text = "uce (log scale)"
		}
		if err := save(p, fmt.Sprintf("severity_%s_%s.png", spec.exp, spec.metric)); err != nil {
			return nil, err
		}
	}
	return files, nil
}

func seedsOf(r *Results) string {
	n := 0
	for _, x := range r.Runs {
		n = max(n, x.Seeds)
	}
	return fmt.Sprint(n)
}

// isTableTwoMethod reports whether m is an aleatoric head read-out.
func isTableTwoMethod(m string) bool {
	for _, h := range headNames {
		if m == h+"_sep" || m == h+"_shared" {
			return true
		}
	}
	return false
}

// isSkyMethod: the methods of Tab. 4 plus the aleatoric heads (supplementary
// tables use them as OOD scores); the K/lambda ablations have their own table.
func isSkyMethod(m string) bool {
	switch m {
	case "dido_sep", "dido_shared", MethodDIDOLabeledOnly, "categorical", MethodEnsemble, MethodInject, MethodGradient:
		return true
	}
	return isTableTwoMethod(m)
}
