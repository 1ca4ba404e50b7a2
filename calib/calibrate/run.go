package calibrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/calib/dataset"
	"github.com/didoedge/didoedge/runtime"
)

// Options configure a calibration run.
type Options struct {
	// Config gives the models, the zones and the level thresholds (its
	// calibration, or the defaults) that the result keeps.
	Config *runtime.Config
	// Data is a data set in the layout of calib/dataset (OpenSim).
	Data  string
	Split string // default "val"
	// TargetFAR is the false-alarm rate on in-distribution data, bounded
	// twice: tau_e is at least the (1 - TargetFAR)-quantile of K/S (pixels),
	// and each zone's tau_e is raised until at most that fraction of the
	// frames would open an ood_fraction event in the zone (see zoneEventTau);
	// tau_a is the (1 - TargetFAR)-quantile of b/depth.
	TargetFAR float64
	// Coverage is the nominal coverage of the Laplace interval (default 0.9).
	Coverage  float64
	MaxFrames int // 0: the whole split
	Log       *slog.Logger
}

// Result is the calibration and the figures that justify it.
type Result struct {
	Calibration                   alerts.Calibration
	Frames                        int
	Pixels                        int     // valid pixels (finite depth > 0)
	GTPixels                      int     // pixels with ground truth, for coverage and UCE
	CoverageBefore, CoverageAfter float64 // NaN without ground truth
	UCEBefore, UCEAfter           float64 // NaN without ground truth
	// NoGroundTruth: the frames had no depth ground truth (a data set
	// exported from a recording). tau_e and tau_a are set; the Laplace
	// scale correction needs the depth errors, so the config's
	// calibration's scale_correction is kept and coverage and UCE are NaN.
	NoGroundTruth bool
	// FrameAlarmRate is the fraction of validation frames in which some
	// zone's ood_fraction reaches the warn level with the new tau_e.
	FrameAlarmRate float64
}

// zoneValues are the K/S values of one zone, with the offsets of each frame.
type zoneValues struct {
	values []float32
	starts []int
}

// Run calibrates; see Options.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Split == "" {
		o.Split = "val"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Coverage == 0 {
		o.Coverage = 0.9
	}
	if !(o.TargetFAR > 0 && o.TargetFAR < 1) {
		return nil, fmt.Errorf("calibrate: target false-alarm rate %g must be in (0,1)", o.TargetFAR)
	}
	if !(o.Coverage > 0 && o.Coverage < 1) {
		return nil, fmt.Errorf("calibrate: coverage %g must be in (0,1)", o.Coverage)
	}
	cfg := o.Config
	base, err := cfg.AlertsConfig.LoadCalibrationFor()
	if err != nil {
		return nil, err
	}
	zones, ignore, err := cfg.AlertsConfig.ZoneSet.Resolve("alerts")
	if err != nil {
		return nil, err
	}
	ds, err := dataset.OpenSim(o.Data)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	items, err := ds.Split(o.Split)
	if err != nil {
		return nil, fmt.Errorf("calibrate: data set %q: %w", o.Data, err)
	}
	if o.MaxFrames > 0 && len(items) > o.MaxFrames {
		items = items[:o.MaxFrames]
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("calibrate: data set %q has no %s frames", o.Data, o.Split)
	}
	models, err := runtime.OpenModels(ctx, cfg, o.Log)
	if err != nil {
		return nil, err
	}
	defer models.Close()
	mw, mh := models.MapSize()
	raster, err := alerts.Rasterize(zones, ignore, mw, mh)
	if err != nil {
		return nil, err
	}

	per := make([]zoneValues, len(zones))
	var all, ratio, absErr, scale []float32
	gt := make([]float32, mw*mh)
	res := &Result{}
	start := time.Now()
	for n, it := range items {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s, err := ds.Load(it)
		if err != nil {
			return nil, fmt.Errorf("calibrate: %w", err)
		}
		maps, err := models.Infer(ctx, s.RGB, s.Width, s.Height)
		if errors.Is(err, runtime.ErrInvalidOutput) {
			o.Log.Warn("skipping frame with non-finite model outputs", "frame", s.Name)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("calibrate: frame %s: %w", s.Name, err)
		}
		if s.Sparse != nil {
			resampleNearest(s.Sparse, s.Width, s.Height, gt, mw, mh)
		} else {
			clear(gt) // no ground truth: no pixel enters coverage or UCE
		}
		for i, d := range maps.Depth {
			e, b := maps.Epistemic[i], maps.Scale[i]
			if !(d > 0) || e-e != 0 || !(b >= 0) || b-b != 0 {
				continue
			}
			all = append(all, e)
			ratio = append(ratio, b/d)
			res.Pixels++
			if y := gt[i]; y > 0 {
				absErr = append(absErr, float32(math.Abs(float64(d-y))))
				scale = append(scale, b)
			}
		}
		for z, px := range raster {
			zv := &per[z]
			zv.starts = append(zv.starts, len(zv.values))
			for _, i := range px {
				d, e, b := maps.Depth[i], maps.Epistemic[i], maps.Scale[i]
				if d > 0 && e-e == 0 && b >= 0 && b-b == 0 {
					zv.values = append(zv.values, e)
				}
			}
		}
		res.Frames++
		if (n+1)%50 == 0 {
			o.Log.Info("calibrate", "frames", n+1, "of", len(items), "elapsed", time.Since(start).Round(time.Second))
		}
	}
	if res.Frames == 0 || res.Pixels == 0 {
		return nil, fmt.Errorf("calibrate: no valid pixel in %d %s frames", len(items), o.Split)
	}
	res.GTPixels = len(absErr)
	res.NoGroundTruth = len(absErr) == 0
	if res.NoGroundTruth && ds.Meta.HasGroundTruth() {
		return nil, fmt.Errorf("calibrate: no ground-truth pixel in the %s split of %q", o.Split, o.Data)
	}
	q := 1 - o.TargetFAR
	cal := base
	cal.Coverage = o.Coverage
	cal.TauE = clampTau(Quantile(append([]float32(nil), all...), q))
	cal.TauEZones = map[string]float64{}
	for z, zv := range per {
		if len(zv.values) > 0 {
			tau := Quantile(append([]float32(nil), zv.values...), q)
			if lv := cal.Levels.OODFraction; lv != nil {
				tau = math.Max(tau, zoneEventTau(zv, lv.Warn.Enter, q))
			}
			cal.TauEZones[zones[z].Name] = clampTau(tau)
		}
	}
	corr := base.ScaleCorrection
	if res.NoGroundTruth {
		o.Log.Warn("no depth ground truth: tau_e and tau_a are set, the Laplace coverage correction needs ground truth; keeping the configured scale_correction",
			"data", o.Data, "scale_correction", corr)
	} else {
		corr = ScaleCorrection(absErr, scale, o.Coverage)
	}
	if !(corr > 0) || math.IsInf(corr, 0) {
		return nil, fmt.Errorf("calibrate: scale correction %g is not a positive number (all predicted b zero?)", corr)
	}
	cal.ScaleCorrection = corr
	for i := range ratio {
		ratio[i] *= float32(corr)
	}
	cal.TauA = math.Max(Quantile(ratio, q), 1e-6)
	res.CoverageBefore = Coverage(absErr, scale, 1, o.Coverage)
	res.CoverageAfter = Coverage(absErr, scale, corr, o.Coverage)
	res.UCEBefore, res.UCEAfter = math.NaN(), math.NaN()
	if !res.NoGroundTruth {
		if res.UCEBefore, err = UCE(absErr, scale, 1); err != nil {
			return nil, err
		}
		if res.UCEAfter, err = UCE(absErr, scale, corr); err != nil {
			return nil, err
		}
	}
	res.FrameAlarmRate = frameAlarmRate(per, zones, cal, res.Frames)
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	cal.Meta = map[string]string{
		"source":           "didoedge calibrate",
		"data":             o.Data,
		"split":            o.Split,
		"frames":           strconv.Itoa(res.Frames),
		"pixels":           strconv.Itoa(res.Pixels),
		"gt_pixels":        strconv.Itoa(res.GTPixels),
		"target_far":       f(o.TargetFAR),
		"coverage":         f(o.Coverage),
		"coverage_before":  f(res.CoverageBefore),
		"coverage_after":   f(res.CoverageAfter),
		"uce_before_m":     f(res.UCEBefore),
		"uce_after_m":      f(res.UCEAfter),
		"frame_alarm_rate": f(res.FrameAlarmRate),
		"depth_model":      cfg.Depth.Model,
		"auxue_model":      cfg.AuxUE.Model,
		"time":             time.Now().UTC().Format(time.RFC3339),
	}
	if res.NoGroundTruth {
		for _, k := range []string{"coverage_before", "coverage_after", "uce_before_m", "uce_after_m"} {
			delete(cal.Meta, k)
		}
		cal.Meta["scale_correction"] = "kept from the configured calibration: the Laplace coverage correction needs depth ground truth, which " + o.Data + " has none of"
	}
	if err := cal.Validate(); err != nil {
		return nil, fmt.Errorf("calibrate: result: %w", err)
	}
	res.Calibration = cal
	return res, nil
}

// clampTau keeps tau_e in (0,1], the range the calibration format allows
// (K/S itself lies in (0,1]).
func clampTau(v float64) float64 {
	if math.IsNaN(v) {
		return 1
	}
	return math.Min(1, math.Max(v, 1e-6))
}

// zoneEventTau is the smallest tau_e that keeps the zone's ood_fraction
// (the share of its K/S values above tau_e) below enter in a fraction q of
// the frames. A frame stays quiet iff tau_e >= its m-th largest value, m =
// ceil(enter * n), so the result is the q-quantile of those per-frame
// values. Pixel quantiles alone do not bound events: the K/S of one frame is
// spatially correlated, and a few frames can hold all the exceedances.
func zoneEventTau(zv zoneValues, enter, q float64) float64 {
	if !(enter > 0) {
		return 0
	}
	var quiet []float32
	for f, lo := range zv.starts {
		hi := len(zv.values)
		if f+1 < len(zv.starts) {
			hi = zv.starts[f+1]
		}
		n := hi - lo
		if n == 0 {
			continue
		}
		v := slices.Clone(zv.values[lo:hi])
		slices.Sort(v)
		m := max(int(math.Ceil(enter*float64(n)-1e-9)), 1)
		quiet = append(quiet, v[n-m])
	}
	if len(quiet) == 0 {
		return 0
	}
	return Quantile(quiet, q)
}

// frameAlarmRate counts the frames in which any zone's fraction of K/S
// above its tau_e reaches the warn entry level of ood_fraction.
func frameAlarmRate(per []zoneValues, zones []alerts.Zone, cal alerts.Calibration, frames int) float64 {
	if cal.Levels.OODFraction == nil || frames == 0 {
		return 0
	}
	enter := cal.Levels.OODFraction.Warn.Enter
	alarms := 0
	for f := range frames {
		for z, zv := range per {
			if f >= len(zv.starts) {
				continue
			}
			lo, hi := zv.starts[f], len(zv.values)
			if f+1 < len(zv.starts) {
				hi = zv.starts[f+1]
			}
			if hi == lo {
				continue
			}
			tau := float32(cal.TauE)
			if v, ok := cal.TauEZones[zones[z].Name]; ok {
				tau = float32(v)
			}
			over := 0
			for _, e := range zv.values[lo:hi] {
				if e > tau {
					over++
				}
			}
			if float64(over)/float64(hi-lo) >= enter {
				alarms++
				break
			}
		}
	}
	return float64(alarms) / float64(frames)
}

// resampleNearest maps a sparse ground-truth map to another size by
// nearest neighbour (pixel centres), keeping zeros as "no ground truth".
func resampleNearest(src []float32, sw, sh int, dst []float32, dw, dh int) {
	if sw == dw && sh == dh {
		copy(dst, src)
		return
	}
	for y := range dh {
		sy := min(sh-1, int((float64(y)+0.5)*float64(sh)/float64(dh)))
		for x := range dw {
			sx := min(sw-1, int((float64(x)+0.5)*float64(sw)/float64(dw)))
			dst[y*dw+x] = src[sy*sw+sx]
		}
	}
}
