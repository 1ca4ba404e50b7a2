package calibrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/runtime/domain"
)

// Named is a summary with the name (file or object) it was read from, for
// messages.
type Named struct {
	Name    string
	Summary *Summary
}

// MergeOptions are the choices a merge makes on the summaries' statistics.
type MergeOptions struct {
	// TargetFAR and Coverage as in Options.
	TargetFAR, Coverage float64
	// Force calibrates on data that look out of distribution for the
	// AuxUE (CheckStranger) with a warning instead of refusing.
	Force bool
	Log   *slog.Logger
}

// ReadSummary decodes a summary (unknown keys and another format are
// errors naming name).
func ReadSummary(r io.Reader, name string) (*Summary, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var s Summary
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("calibration summary %s: %w", name, err)
	}
	if s.Format != SummaryFormat {
		return nil, fmt.Errorf("calibration summary %s: format %q, want %q", name, s.Format, SummaryFormat)
	}
	if s.MantissaBits != MantissaBits {
		return nil, fmt.Errorf("calibration summary %s: mantissa_bits %d, this build bins with %d", name, s.MantissaBits, MantissaBits)
	}
	z := len(s.Zones)
	if len(s.KSZones) != z || len(s.RatioZones) != z {
		return nil, fmt.Errorf("calibration summary %s: %d zones, %d ks_zones, %d b_over_depth_zones", name, z, len(s.KSZones), len(s.RatioZones))
	}
	for _, q := range [][][]float32{s.QuietKS, s.QuietRatio} {
		if q != nil && int64(len(q)) != s.Frames {
			return nil, fmt.Errorf("calibration summary %s: %d frames, %d rows of per-frame values", name, s.Frames, len(q))
		}
		for f, row := range q {
			if len(row) != z {
				return nil, fmt.Errorf("calibration summary %s: frame %d has %d per-zone values for %d zones", name, f, len(row), z)
			}
		}
	}
	if d := s.Domain; d != nil {
		nb := len(d.KSP95)
		if int64(len(d.Distances)) != s.Frames || len(d.KS) != len(d.Distances) || len(d.BOverDepth) != len(d.Distances) || len(d.BOverDepthP95) != nb {
			return nil, fmt.Errorf("calibration summary %s: domain: %d frames, %d distances, %d and %d rows of band values, %d and %d band limits",
				name, s.Frames, len(d.Distances), len(d.KS), len(d.BOverDepth), nb, len(d.BOverDepthP95))
		}
		for f := range d.KS {
			if len(d.KS[f]) != nb || len(d.BOverDepth[f]) != nb {
				return nil, fmt.Errorf("calibration summary %s: domain: frame %d has %d and %d band values for %d bands", name, f, len(d.KS[f]), len(d.BOverDepth[f]), nb)
			}
		}
	}
	if s.KS.N() != s.Pixels || s.Ratio.N() != s.Pixels {
		return nil, fmt.Errorf("calibration summary %s: %d pixels, histograms of %d (ks) and %d (b_over_depth)", name, s.Pixels, s.KS.N(), s.Ratio.N())
	}
	if s.ErrOverB.N()+s.ZeroB != s.GTPixels {
		return nil, fmt.Errorf("calibration summary %s: %d ground-truth pixels, %d in abs_err_over_b and %d with b = 0", name, s.GTPixels, s.ErrOverB.N(), s.ZeroB)
	}
	return &s, nil
}

// WriteSummary writes s as JSON.
func (s *Summary) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	return enc.Encode(s)
}

// compatible refuses to merge b into a (first) when they come from
// different models, specs, zones or base calibrations.
func compatible(a, b Named) error {
	x, y := a.Summary, b.Summary
	diff := func(what, va, vb string) error {
		return fmt.Errorf("calibrate merge: %s has %s %s, %s has %s: summaries of different models, specs or configs do not merge",
			b.Name, what, vb, a.Name, va)
	}
	mx, my := x.Models, y.Models
	for _, f := range []struct{ what, va, vb, pa, pb string }{
		{"depth model sha256", mx.DepthSHA256, my.DepthSHA256, mx.Depth, my.Depth},
		{"depth spec sha256", mx.DepthSpec, my.DepthSpec, "", ""},
		{"auxue model sha256", mx.AuxUESHA256, my.AuxUESHA256, mx.AuxUE, my.AuxUE},
		{"auxue spec sha256", mx.AuxUESpec, my.AuxUESpec, "", ""},
		{"zones sha256", x.ZonesSHA256, y.ZonesSHA256, strings.Join(x.Zones, ","), strings.Join(y.Zones, ",")},
	} {
		if f.va != f.vb {
			va, vb := f.va, f.vb
			if f.pa != "" || f.pb != "" {
				va, vb = fmt.Sprintf("%s (%s)", va, f.pa), fmt.Sprintf("%s (%s)", vb, f.pb)
			}
			return diff(f.what, va, vb)
		}
	}
	if !slices.Equal(x.Zones, y.Zones) {
		return diff("zones", strings.Join(x.Zones, ","), strings.Join(y.Zones, ","))
	}
	ja, _ := json.Marshal(x.Base)
	jb, _ := json.Marshal(y.Base)
	if !bytes.Equal(ja, jb) {
		return diff("base calibration", string(ja), string(jb))
	}
	// Relative is only known once a shard opened the models (empty shards
	// do not), and the model hashes already agree.
	return nil
}

// checkCoverage refuses duplicate or missing shards of one listing, and
// listings that share a data set.
func checkCoverage(sums []Named) error {
	type group struct {
		count, frames int
		seen          map[int]string
		sources       map[string]bool
	}
	groups := map[string]*group{}
	var order []string
	for _, n := range sums {
		l := n.Summary.Listing
		g := groups[l.SHA256]
		if g == nil {
			g = &group{count: l.Count, frames: l.Frames, seen: map[int]string{}, sources: map[string]bool{}}
			groups[l.SHA256] = g
			order = append(order, l.SHA256)
		}
		if l.Count != g.count || l.Frames != g.frames {
			return fmt.Errorf("calibrate merge: %s: listing %.12s cut into %d shards of %d frames, another summary says %d of %d",
				n.Name, l.SHA256, l.Count, l.Frames, g.count, g.frames)
		}
		if prev, dup := g.seen[l.Index]; dup {
			return fmt.Errorf("calibrate merge: %s and %s are both shard %d of %d of listing %.12s (its frames would count twice)",
				prev, n.Name, l.Index, l.Count, l.SHA256)
		}
		g.seen[l.Index] = n.Name
		for _, d := range n.Summary.Data {
			g.sources[d.Source] = true
		}
	}
	owner := map[string]string{}
	for _, sha := range order {
		g := groups[sha]
		var missing []string
		for i := range g.count {
			if _, ok := g.seen[i]; !ok {
				missing = append(missing, strconv.Itoa(i))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("calibrate merge: listing %.12s (%d frames in %d shards): shard(s) %s missing",
				sha, g.frames, g.count, strings.Join(missing, ", "))
		}
		for src := range g.sources {
			if other, ok := owner[src]; ok && other != sha {
				return fmt.Errorf("calibrate merge: data set %s is in listings %.12s and %.12s (its frames would count twice)", src, other, sha)
			}
			owner[src] = sha
		}
	}
	return nil
}

// Merge combines shard summaries into the calibration: thresholds from the
// merged histograms (the upper edge of the quantile's bin: above the exact
// quantile by less than one bin, MantissaBits), the zone-event bounds and
// frame alarm rates from the exact per-frame values, the scale correction
// from the merged |e|/b histogram.
func Merge(sums []Named, o MergeOptions) (*Result, error) {
	if o.Coverage == 0 {
		o.Coverage = 0.9
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if !(o.TargetFAR > 0 && o.TargetFAR < 1) {
		return nil, fmt.Errorf("calibrate: target false-alarm rate %g must be in (0,1)", o.TargetFAR)
	}
	if !(o.Coverage > 0 && o.Coverage < 1) {
		return nil, fmt.Errorf("calibrate: coverage %g must be in (0,1)", o.Coverage)
	}
	if len(sums) == 0 {
		return nil, fmt.Errorf("calibrate merge: no summary given")
	}
	for _, n := range sums[1:] {
		if err := compatible(sums[0], n); err != nil {
			return nil, err
		}
	}
	if err := checkCoverage(sums); err != nil {
		return nil, err
	}
	first := sums[0].Summary
	m := &Summary{Zones: first.Zones, Base: first.Base, Models: first.Models,
		KSZones: make([]Hist, len(first.Zones)), RatioZones: make([]Hist, len(first.Zones))}
	relSet := false
	var sources, splits []string
	for _, n := range sums {
		s := n.Summary
		if s.Frames > 0 {
			if relSet && s.Relative != m.Relative {
				return nil, fmt.Errorf("calibrate merge: %s says relative %v, another summary %v", n.Name, s.Relative, m.Relative)
			}
			m.Relative, relSet = s.Relative, true
		}
		m.Frames += s.Frames
		m.Skipped += s.Skipped
		m.Pixels += s.Pixels
		m.GTPixels += s.GTPixels
		m.KS.Merge(&s.KS)
		m.Ratio.Merge(&s.Ratio)
		for z := range m.KSZones {
			m.KSZones[z].Merge(&s.KSZones[z])
			m.RatioZones[z].Merge(&s.RatioZones[z])
		}
		m.ErrOverB.Merge(&s.ErrOverB)
		m.ZeroB += s.ZeroB
		m.ZeroBZeroErr += s.ZeroBZeroErr
		m.UCE.Merge(&s.UCE)
		m.QuietKS = append(m.QuietKS, s.QuietKS...)
		m.QuietRatio = append(m.QuietRatio, s.QuietRatio...)
		for _, d := range s.Data {
			if d.Frames > 0 && !slices.Contains(sources, d.Source) {
				sources = append(sources, d.Source)
			}
			if d.Frames > 0 && !slices.Contains(splits, d.Split) {
				splits = append(splits, d.Split)
			}
		}
	}
	slices.Sort(sources)
	if m.Frames == 0 || m.Pixels == 0 {
		return nil, fmt.Errorf("calibrate merge: no valid pixel in %d frames of %d summaries", m.Frames, len(sums))
	}
	slices.Sort(splits)
	if err := CheckStranger(&m.KS, first.AuxUEValidation); err != nil {
		if !o.Force {
			return nil, fmt.Errorf("calibrate: %w", err)
		}
		o.Log.Warn("calibrating anyway (--force)", "err", err)
	}
	dom, err := mergeDomain(sums)
	if err != nil {
		return nil, err
	}
	var verdict *DomainVerdict
	var domainErr error
	if dom == nil {
		o.Log.Warn("the AuxUE's spec has no training-domain record: calibration cannot check that these frames are in its domain (retrain it with didoedge train auxue)",
			"auxue", first.Models.AuxUE)
	} else {
		v, err := CheckDomain(dom)
		verdict = &v
		if err != nil {
			if !o.Force {
				return nil, fmt.Errorf("calibrate: %w", err)
			}
			domainErr = err
			o.Log.Warn("calibrating anyway (--force)", "err", err)
		}
	}
	res, err := m.calibrate(o, sources, len(sums))
	if err != nil {
		return nil, err
	}
	res.Domain, res.DomainForced = verdict, domainErr
	if verdict != nil && domainErr == nil {
		// The domain monitor's threshold on these in-domain frames: their
		// per-frame distances' (1 - target FAR) quantile, never below the
		// record's cross-validated in-domain p99 (the window's mean of
		// in-domain frames stays below a bound that single frames reach
		// at this rate). Not set on frames the check refused (--force):
		// a threshold raised to cover them would hide the stranger.
		t, err := domain.ThresholdAtFAR(dom.Distances, o.TargetFAR)
		if err != nil {
			return nil, fmt.Errorf("calibrate: domain threshold: %w", err)
		}
		res.Calibration.DomainThreshold = math.Max(t, dom.Limit)
	}
	if verdict != nil {
		f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
		res.Calibration.Meta["domain_median_distance"] = f(verdict.MedianDistance)
		res.Calibration.Meta["domain_limit"] = f(verdict.Limit)
		res.Calibration.Meta["domain_frames_outside"] = strconv.Itoa(verdict.Outside)
		if domainErr != nil {
			res.Calibration.Meta["domain_forced"] = domainErr.Error()
		}
	} else {
		res.Calibration.Meta["domain_check"] = "none: the AuxUE's spec has no training-domain record"
	}
	res.Split = strings.Join(splits, ",")
	res.TargetFAR = o.TargetFAR
	res.Calibration.Meta["split"] = res.Split
	return res, nil
}

// calibrate turns merged statistics into the calibration and its figures.
func (m *Summary) calibrate(o MergeOptions, sources []string, shards int) (*Result, error) {
	res := &Result{Relative: m.Relative, Frames: int(m.Frames), Pixels: int(m.Pixels), GTPixels: int(m.GTPixels),
		Shards: shards, Sources: sources}
	res.NoGroundTruth = m.GTPixels == 0
	q := 1 - o.TargetFAR
	cal := m.Base
	cal.Coverage = o.Coverage
	if m.Relative {
		// A relative model has no metres: the pessimistic depth criterion
		// would be refused by the runtime (Config.checkRelative).
		cal.Levels.PessimisticDepth = nil
	}
	cal.TauE = clampTau(m.KS.Quantile(q))
	cal.TauEZones = map[string]float64{}
	for z, name := range m.Zones {
		if m.KSZones[z].N() > 0 {
			cal.TauEZones[name] = clampTau(zoneTau(&m.KSZones[z], m.QuietKS, z, q))
		}
	}
	corr := m.Base.ScaleCorrection
	l := LaplaceHalfWidth(o.Coverage)
	if res.NoGroundTruth {
		o.Log.Warn("no depth ground truth: tau_e and tau_a are set, the Laplace coverage correction needs ground truth; keeping the configured scale_correction",
			"data", strings.Join(sources, ","), "scale_correction", corr)
	} else {
		// The coverage-quantile of |e|/(b l), over pixels with b > 0 (as
		// ScaleCorrection): the upper edge of the bin of |e|/b, over l.
		corr = m.ErrOverB.Quantile(o.Coverage) / l
	}
	if !(corr > 0) || math.IsInf(corr, 0) {
		return nil, fmt.Errorf("calibrate: scale correction %g is not a positive number (all predicted b zero?)", corr)
	}
	cal.ScaleCorrection = corr
	// The corrected ratio is corr*b/d and corr > 0, so its thresholds are
	// corr times those of b/d.
	cal.TauA = math.Max(corr*m.Ratio.Quantile(q), 1e-6)
	cal.TauAZones = map[string]float64{}
	for z, name := range m.Zones {
		if m.RatioZones[z].N() > 0 {
			cal.TauAZones[name] = math.Max(corr*zoneTau(&m.RatioZones[z], m.QuietRatio, z, q), 1e-6)
		}
	}
	res.CoverageBefore, res.CoverageAfter = math.NaN(), math.NaN()
	res.UCEBefore, res.UCEAfter = math.NaN(), math.NaN()
	if !res.NoGroundTruth {
		// Inside the interval of scale s b: |e|/b <= s l, and pixels with
		// b = 0 and e = 0. After the correction s l is a bin edge, so the
		// count is exact; before it (s = 1) the pixels in the bin of l are
		// left out (at most one bin short).
		gt := float64(m.GTPixels)
		res.CoverageBefore = float64(m.ErrOverB.CountBelow(l)+m.ZeroBZeroErr) / gt
		res.CoverageAfter = float64(m.ErrOverB.CountBelow(corr*l*(1+1e-12))+m.ZeroBZeroErr) / gt
		res.UCEBefore = m.UCE.UCE(1, metrics.DefaultUCEBins)
		res.UCEAfter = m.UCE.UCE(corr, metrics.DefaultUCEBins)
	}
	res.FrameAlarmRate = quietAlarmRate(m.QuietKS, m.Zones, cal.TauEFor, 1, res.Frames)
	res.AleatoricAlarmRate = quietAlarmRate(m.QuietRatio, m.Zones, cal.TauAFor, corr, res.Frames)
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	data := strings.Join(sources, ",")
	cal.Meta = map[string]string{
		"source":               "didoedge calibrate",
		"data":                 data,
		"shards":               strconv.Itoa(shards),
		"histogram_bins":       fmt.Sprintf("%d per octave (thresholds are bin upper edges, at most 2^-%d above the exact quantile)", 1<<MantissaBits, MantissaBits),
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
		"depth_model":          m.Models.Depth,
		"depth_model_sha256":   m.Models.DepthSHA256,
		"auxue_model":          m.Models.AuxUE,
		"auxue_model_sha256":   m.Models.AuxUESHA256,
		"relative":             strconv.FormatBool(m.Relative),
		"time":                 time.Now().UTC().Format(time.RFC3339),
	}
	if m.Skipped > 0 {
		cal.Meta["skipped_frames"] = strconv.FormatInt(m.Skipped, 10)
	}
	if res.NoGroundTruth {
		for _, k := range []string{"coverage_before", "coverage_after", "uce_before_m", "uce_after_m"} {
			delete(cal.Meta, k)
		}
		cal.Meta["scale_correction"] = "kept from the configured calibration: the Laplace coverage correction needs depth ground truth, which " + data + " has none of"
	}
	if err := cal.Validate(); err != nil {
		return nil, fmt.Errorf("calibrate: result: %w", err)
	}
	res.Calibration = cal
	return res, nil
}

// zoneTau is a zone's pixel threshold at quantile q: the larger of the
// q-quantile of its values (h) and the zone-event bound of its per-frame
// values (quietQuantile). Pixel quantiles alone do not bound events: the
// K/S of one frame is spatially correlated, and a few frames can hold all
// the exceedances.
func zoneTau(h *Hist, rows [][]float32, z int, q float64) float64 {
	return math.Max(h.Quantile(q), quietQuantile(rows, z, q))
}

// quietQuantile is the zone-event bound on the merged per-frame values of zone z:
// the q-quantile (nearest rank, exact) of the frames' quiet values, 0
// without any (no criterion, or no frame with pixels in the zone).
func quietQuantile(rows [][]float32, z int, q float64) float64 {
	var v []float32
	for _, r := range rows {
		if r[z] >= 0 {
			v = append(v, r[z])
		}
	}
	if len(v) == 0 {
		return 0
	}
	return Quantile(v, q)
}

// quietAlarmRate is frameAlarmRate on per-frame values: a frame alarms
// when some zone's quiet value exceeds the zone's threshold (tauFor,
// applied to scale*value).
func quietAlarmRate(rows [][]float32, zones []string, tauFor func(string) float64, scale float64, frames int) float64 {
	if len(rows) == 0 || frames == 0 {
		return 0
	}
	taus := make([]float32, len(zones))
	for z, name := range zones {
		taus[z] = float32(tauFor(name) / scale)
	}
	alarms := 0
	for _, r := range rows {
		for z, v := range r {
			if v >= 0 && v > taus[z] {
				alarms++
				break
			}
		}
	}
	return float64(alarms) / float64(frames)
}
