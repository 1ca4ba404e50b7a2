package calibrate

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// WriteSummary prints what a run found: frames and pixels, tau_e and tau_a
// (overall and per zone), the scale correction with the interval coverage
// and UCE before and after it, and the validation frames' alarm rates.
func (r *Result) WriteSummary(w io.Writer) {
	c := r.Calibration
	data := strings.Join(r.Sources, ", ")
	fmt.Fprintf(w, "calibrated on %d %s frames of %s (%d valid pixels, %d with ground truth; %d shard(s) merged, thresholds at bin upper edges, bins 2^-%d of the value wide)\n",
		r.Frames, r.Split, data, r.Pixels, r.GTPixels, r.Shards, MantissaBits)
	switch {
	case r.Relative && r.NoGroundTruth:
		// nothing to align to: the frames' relative maps are used as they are
		fmt.Fprintf(w, "relative depth model: tau_a uses the relative b (b/depth); no pessimistic_depth_m criterion\n")
	case r.Relative:
		fmt.Fprintf(w, "relative depth model: frames aligned to their ground truth; tau_a and the interval use the relative b (b/depth); no pessimistic_depth_m criterion\n")
	}
	fmt.Fprintf(w, "tau_e %.4g at target false-alarm rate %g; per zone:", c.TauE, r.TargetFAR)
	names := make([]string, 0, len(c.TauEZones))
	for n := range c.TauEZones {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, " %s %.4g", n, c.TauEZones[n])
	}
	fmt.Fprintf(w, "\ntau_a %.4g (corrected b/depth); per zone:", c.TauA)
	for _, n := range names {
		fmt.Fprintf(w, " %s %.4g", n, c.TauAZones[n])
	}
	fmt.Fprintf(w, "\nscale_correction %.4g\n", c.ScaleCorrection)
	if r.NoGroundTruth {
		fmt.Fprintf(w, "no depth ground truth in %s: tau_e and tau_a are set; the Laplace coverage correction needs ground truth, scale_correction %.4g was kept from the configured calibration\n", data, c.ScaleCorrection)
	} else {
		fmt.Fprintf(w, "Laplace interval coverage at nominal %.2f: before %.4f, after %.4f\n", c.Coverage, r.CoverageBefore, r.CoverageAfter)
		unit := "m"
		if r.Relative {
			unit = "relative error"
		}
		fmt.Fprintf(w, "UCE (%s, 15 bins): before %.4f, after %.4f\n", unit, r.UCEBefore, r.UCEAfter)
	}
	fmt.Fprintf(w, "validation frames with a zone at warn (ood_fraction): %.2f%%, (aleatoric_fraction): %.2f%%\n",
		100*r.FrameAlarmRate, 100*r.AleatoricAlarmRate)
	switch d := r.Domain; {
	case d == nil:
		fmt.Fprintf(w, "warning: the AuxUE's spec has no training-domain record, so these frames could not be checked against its domain "+
			"(thresholds set on foreign frames silence its alarms): retrain it with didoedge train auxue to get one\n")
	case r.DomainForced != nil:
		fmt.Fprintf(w, "warning: calibrated with --force on frames the domain check refused: %v\n", r.DomainForced)
	default:
		fmt.Fprintf(w, "domain check: %d frames in the AuxUE's training domain (median distance %.3g, in the domain %.3g; %d above the in-domain p99 %.3g); domain_threshold %.4g\n",
			d.Frames, d.MedianDistance, d.DomainMedian, d.Outside, d.Limit, r.Calibration.DomainThreshold)
	}
}
