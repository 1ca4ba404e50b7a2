package calibrate

import (
	"context"
	"fmt"
	"log/slog"
	"math"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/runtime/infer"
)

// Options configure a calibration run.
type Options struct {
	// Models are the depth model and the AuxUE with their specs; Alerts
	// gives the zones and the level thresholds (its calibration, or the
	// defaults) that the result keeps.
	Models infer.ModelsConfig
	Alerts alerts.Config
	// Data is a data set directory (dataset.Open: the sim render
	// layout, real KITTI or NYU); Layout forces its layout and KITTIDepth
	// names KITTI's annotated depth root (default Data). Inputs are more
	// data sets (Data, when set, is one more).
	Data, Layout, KITTIDepth string
	Inputs                   []Input
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
	MaxFrames int // 0: all the split's frames of each data set
	// Force calibrates on data that look out of distribution for the
	// AuxUE (CheckStranger, CheckDomain) with a warning instead of
	// refusing.
	Force bool
	Log   *slog.Logger
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
	// Shards is the number of summaries merged; Sources the data sets.
	Shards  int
	Sources []string
	// Split is the split(s) read, TargetFAR the rate calibrated for.
	Split     string
	TargetFAR float64
	// Domain is the check of the frames against the AuxUE's
	// training-domain record (CheckDomain); nil when its spec has none
	// (the calibration then warns that it could not check). DomainForced
	// is the refusal --force overrode.
	Domain       *DomainVerdict
	DomainForced error
}

// alignMaxDepth bounds an aligned relative depth (metres), KITTI's cap.
const alignMaxDepth = 80

// Inputs is the data sets of o: Data (if set), then Inputs.
func (o Options) inputs() []Input {
	in := o.Inputs
	if o.Data != "" {
		in = append([]Input{{Dir: o.Data, Layout: o.Layout, KITTIDepth: o.KITTIDepth}}, in...)
	}
	return in
}

// Run calibrates in one process: one shard over the whole listing, merged
// alone, so that a single run and any sharded run agree exactly (the
// histograms add; see Summary).
func Run(ctx context.Context, o Options) (*Result, error) {
	if !(o.TargetFAR > 0 && o.TargetFAR < 1) {
		return nil, fmt.Errorf("calibrate: target false-alarm rate %g must be in (0,1)", o.TargetFAR)
	}
	if o.Coverage != 0 && !(o.Coverage > 0 && o.Coverage < 1) {
		return nil, fmt.Errorf("calibrate: coverage %g must be in (0,1)", o.Coverage)
	}
	sum, err := Shard(ctx, ShardOptions{Models: o.Models, Alerts: o.Alerts, Inputs: o.inputs(), Split: o.Split, MaxFrames: o.MaxFrames, Log: o.Log})
	if err != nil {
		return nil, err
	}
	split := o.Split
	if split == "" {
		split = "val"
	}
	if sum.Frames == 0 || sum.Pixels == 0 {
		return nil, fmt.Errorf("calibrate: no valid pixel in the %s frames of %v", split, o.inputs())
	}
	res, err := Merge([]Named{{Name: "the run", Summary: sum}}, MergeOptions{TargetFAR: o.TargetFAR, Coverage: o.Coverage, Force: o.Force, Log: o.Log})
	if err != nil {
		return nil, err
	}
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
