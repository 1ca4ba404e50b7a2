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
	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// Options configure a calibration run.
type Options struct {
	// Config gives the models, the zones and the level thresholds (its
	// calibration, or the defaults) that the result keeps.
	Config *runconfig.Config
	// Data is a data set directory (dataset.Open: the sim render
	// layout, real KITTI or NYU); Layout forces its layout and KITTIDepth
	// names KITTI's annotated depth root (default Data).
	Data, Layout, KITTIDepth string
	// Split is a split name (train, val, test, all) or a split file
	// (KITTI, Eigen-style lines); default "val".
	Split string
	// TargetFAR is the false-alarm rate on in-distribution data, bounded
	// twice for each zone criterion: the zone's tau_e (tau_a) is at least
	// the (1 - TargetFAR)-quantile of its pixels' K/S (corrected b/depth),
	// and is raised until at most that fraction of the frames would open
	// an ood_fraction (aleatoric_fraction) event in the zone (zoneEventTau).
	// The global tau_e and tau_a are the pixel quantiles over all zones.
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
	// AleatoricAlarmRate is the same for aleatoric_fraction with the new
	// per-zone tau_a.
	AleatoricAlarmRate float64
	// Relative is set for a relative depth model: each frame was aligned
	// to its ground truth, coverage and UCE compare |d - y|/y with the
	// relative b, and tau_a thresholds the relative b itself.
	Relative bool
}

// alignMaxDepth bounds an aligned relative depth (metres), KITTI's cap.
const alignMaxDepth = 80

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
	ds, err := dataset.Open(dataset.Source{Dir: o.Data, Layout: o.Layout, KITTIDepth: o.KITTIDepth})
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	items, err := ds.Items(o.Split)
	if err != nil {
		return nil, fmt.Errorf("calibrate: data set %q: %w", o.Data, err)
	}
	if o.MaxFrames > 0 && len(items) > o.MaxFrames {
		items = items[:o.MaxFrames]
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("calibrate: data set %q has no %s frames", o.Data, o.Split)
	}
	models, err := infer.OpenModels(ctx, cfg.ModelsConfig(), o.Log)
	if err != nil {
		return nil, err
	}
	defer models.Close()
	relative := models.Relative()

	per := make([]zoneValues, len(zones))  // K/S per zone
	perA := make([]zoneValues, len(zones)) // b/depth per zone (before the scale correction)
	var all, ratio, absErr, scale []float32
	var aligned []float32
	var raster [][]int32
	rw, rh := 0, 0
	res := &Result{Relative: relative}
	start := time.Now()
	for n, it := range items {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s, err := ds.Load(it)
		if err != nil {
			return nil, fmt.Errorf("calibrate: %w", err)
		}
		models.FrameFocal(s.Intrinsics.Fx, s.Width)
		maps, err := models.Infer(ctx, s.RGB, s.Width, s.Height)
		if errors.Is(err, infer.ErrInvalidOutput) {
			o.Log.Warn("skipping frame with non-finite model outputs", "frame", s.Name)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("calibrate: frame %s: %w", s.Name, err)
		}
		if s.Width != rw || s.Height != rh {
			if raster, err = alerts.Rasterize(zones, ignore, s.Width, s.Height); err != nil {
				return nil, err
			}
			rw, rh = s.Width, s.Height
		}
		// Metric depth d and the error targets: |d - y| against b for a
		// metric model; for a relative model the frame is aligned to its
		// ground truth (least squares in inverse depth) and the relative
		// error |d - y|/y is compared with the relative b.
		depth := maps.Depth
		alignedOK := false
		if relative && s.Sparse != nil {
			if len(aligned) != len(depth) {
				aligned = make([]float32, len(depth))
			}
			if a, err := metrics.AlignInverseDepth(depth, s.Sparse); err == nil {
				a.Apply(depth, aligned, alignMaxDepth)
				alignedOK = true
			}
		}
		valid := func(i int) bool {
			d, e, b := maps.Depth[i], maps.Epistemic[i], maps.Scale[i]
			if relative {
				return d-d == 0 && e-e == 0 && b >= 0 && b-b == 0
			}
			return d > 0 && e-e == 0 && b >= 0 && b-b == 0
		}
		for i := range maps.Depth {
			if !valid(i) {
				continue
			}
			e, b := maps.Epistemic[i], maps.Scale[i]
			all = append(all, e)
			res.Pixels++
			if relative {
				ratio = append(ratio, b) // b is already relative to the depth
			} else {
				ratio = append(ratio, b/maps.Depth[i])
			}
			if s.Sparse == nil {
				continue
			}
			y := s.Sparse[i]
			switch {
			case !(y > 0):
			case relative && alignedOK:
				absErr = append(absErr, float32(math.Abs(float64(aligned[i]-y))/float64(y)))
				scale = append(scale, b)
			case !relative:
				absErr = append(absErr, float32(math.Abs(float64(maps.Depth[i]-y))))
				scale = append(scale, b)
			}
		}
		for z, px := range raster {
			zv, za := &per[z], &perA[z]
			zv.starts = append(zv.starts, len(zv.values))
			za.starts = append(za.starts, len(za.values))
			for _, i := range px {
				if valid(int(i)) {
					zv.values = append(zv.values, maps.Epistemic[i])
					if relative {
						za.values = append(za.values, maps.Scale[i]) // already relative
					} else {
						za.values = append(za.values, maps.Scale[i]/maps.Depth[i])
					}
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
	if res.NoGroundTruth && ds.HasGroundTruth() {
		return nil, fmt.Errorf("calibrate: no ground-truth pixel in the %s split of %q", o.Split, o.Data)
	}
	q := 1 - o.TargetFAR
	cal := base
	cal.Coverage = o.Coverage
	if relative {
		// A relative model has no metres: the pessimistic depth criterion
		// would be refused by the runtime (Config.checkRelative).
		cal.Levels.PessimisticDepth = nil
	}
	cal.TauE = clampTau(Quantile(append([]float32(nil), all...), q))
	cal.TauEZones = map[string]float64{}
	for z, zv := range per {
		if len(zv.values) > 0 {
			cal.TauEZones[zones[z].Name] = clampTau(zoneThreshold(zv, cal.Levels.OODFraction, q))
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
	// The corrected ratio is corr*b/d and corr > 0, so its thresholds are
	// corr times those of b/d.
	cal.TauAZones = map[string]float64{}
	for z, za := range perA {
		if len(za.values) > 0 {
			cal.TauAZones[zones[z].Name] = math.Max(corr*zoneThreshold(za, cal.Levels.AleatoricFraction, q), 1e-6)
		}
	}
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
	res.FrameAlarmRate = frameAlarmRate(per, zones, cal.Levels.OODFraction, cal.TauEFor, 1, res.Frames)
	res.AleatoricAlarmRate = frameAlarmRate(perA, zones, cal.Levels.AleatoricFraction, cal.TauAFor, corr, res.Frames)
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	cal.Meta = map[string]string{
		"source":               "didoedge calibrate",
		"data":                 o.Data,
		"split":                o.Split,
		"frames":               strconv.Itoa(res.Frames),
		"pixels":               strconv.Itoa(res.Pixels),
		"gt_pixels":            strconv.Itoa(res.GTPixels),
		"target_far":           f(o.TargetFAR),
		"coverage":             f(o.Coverage),
		"coverage_before":      f(res.CoverageBefore),
		"coverage_after":       f(res.CoverageAfter),
		"uce_before_m":         f(res.UCEBefore),
		"uce_after_m":          f(res.UCEAfter),
		"frame_alarm_rate":     f(res.FrameAlarmRate),
		"aleatoric_alarm_rate": f(res.AleatoricAlarmRate),
		"depth_model":          cfg.Depth.Model,
		"auxue_model":          cfg.AuxUE.Model,
		"relative":             strconv.FormatBool(relative),
		"time":                 time.Now().UTC().Format(time.RFC3339),
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

// zoneThreshold is a zone's pixel threshold at quantile q: the larger of
// the q-quantile of its values and, when the criterion c is used, the
// zone-event bound for its warn entry (zoneEventTau).
func zoneThreshold(zv zoneValues, c *alerts.Criterion, q float64) float64 {
	tau := Quantile(slices.Clone(zv.values), q)
	if c != nil {
		tau = math.Max(tau, zoneEventTau(zv, c.Warn.Enter, q))
	}
	return tau
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

// frameAlarmRate counts the frames in which any zone's fraction of values
// above its threshold (tauFor(zone), applied to scale*value) reaches the
// warn entry of criterion c.
func frameAlarmRate(per []zoneValues, zones []alerts.Zone, c *alerts.Criterion, tauFor func(string) float64, scale float64, frames int) float64 {
	if c == nil || frames == 0 {
		return 0
	}
	enter := c.Warn.Enter
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
			tau := float32(tauFor(zones[z].Name) / scale)
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
