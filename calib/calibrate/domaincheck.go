package calibrate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/didoedge/didoedge/runtime/domain"
	"github.com/didoedge/didoedge/runtime/infer"
)

// ErrOutsideDomain marks calibration data outside the AuxUE's training
// domain (CheckDomain).
var ErrOutsideDomain = errors.New("calibration data are outside the AuxUE's training domain")

// Limits of the domain check (CheckDomain), on the record's
// cross-validated in-domain figures.
const (
	// DomainFAR: a frame is outside the domain when its distance exceeds
	// the distance that this fraction of the record's held-out in-domain
	// frames exceed (their p99).
	DomainFAR = 0.01
	// DomainMaxOutside: the data are refused when more than this fraction
	// of their frames is outside. In-domain frames are outside with
	// probability DomainFAR, so that 20 % of n frames happens by chance
	// with a binomial tail below 1e-6 from n = 10 frames on.
	DomainMaxOutside = 0.2
)

// DomainSummary is what a shard measured of its frames against the AuxUE's
// training-domain record (runtime/domain): the record's limits, copied so
// that a merge needs no model, and per frame the distance and the band
// values (mean K/S, b/depth per map band) the record's quantiles are over.
type DomainSummary struct {
	Statistic    string `json:"statistic"`
	RecordFrames int    `json:"record_frames"`
	RecordSource string `json:"record_source,omitempty"`
	// Limit is the distance DomainFAR of the record's in-domain frames
	// exceed; Median their median distance.
	Limit  float64 `json:"limit"`
	Median float64 `json:"median"`
	// KSP95 and BOverDepthP95 are the record's p95 over in-domain frames of
	// each band's K/S and b/depth.
	KSP95         []float64 `json:"ks_p95"`
	BOverDepthP95 []float64 `json:"b_over_depth_p95"`
	// Per frame of the summary, in its order.
	Distances  []float64   `json:"distances"`
	KS         [][]float64 `json:"ks"`
	BOverDepth [][]float64 `json:"b_over_depth"`
}

// domainScanner measures frames against a record: the runtime's statistic
// (infer.DomainFrame, domain.Extractor) and distance.
type domainScanner struct {
	rec     *domain.Record
	ex      *domain.Extractor
	scratch *domain.Scratch
	x       []float64
	sum     *DomainSummary
}

// newDomainScanner prepares the check of the spec's record; nil (and no
// error) when the spec has none.
func newDomainScanner(aux *infer.IOSpec) (*domainScanner, error) {
	if aux == nil {
		return nil, nil
	}
	rec, err := aux.DomainRecord()
	if errors.Is(err, infer.ErrNoDomainRecord) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ex, err := domain.NewExtractor(rec.Layout)
	if err != nil {
		return nil, fmt.Errorf("calibrate: the AuxUE's domain record: %w", err)
	}
	limit, err := rec.Threshold(DomainFAR)
	if err != nil {
		return nil, fmt.Errorf("calibrate: the AuxUE's domain record: %w", err)
	}
	s := &DomainSummary{Statistic: rec.Statistic, RecordFrames: rec.Frames, RecordSource: rec.Source, Limit: limit,
		Median: quantileSorted(rec.Distances, 0.5)}
	for b := range rec.Layout.MapBands {
		s.KSP95 = append(s.KSP95, rec.KS[b].P95)
		s.BOverDepthP95 = append(s.BOverDepthP95, rec.BOverDepth[b].P95)
	}
	return &domainScanner{rec: rec, ex: ex, scratch: rec.NewScratch(), x: make([]float64, rec.Layout.Dim()), sum: s}, nil
}

// frame adds one frame: the models' maps and the input-size picture img
// (w x h) they saw.
func (d *domainScanner) frame(maps infer.Maps, img []uint8, w, h int) error {
	f := infer.DomainFrame(maps, img, w, h)
	if err := d.ex.Extract(&f, d.x); err != nil {
		return fmt.Errorf("calibrate: domain statistics: %w", err)
	}
	dist, err := d.rec.Distance(d.x, d.scratch)
	if err != nil {
		return fmt.Errorf("calibrate: domain distance: %w", err)
	}
	l := d.rec.Layout
	ks, bd := make([]float64, l.MapBands), make([]float64, l.MapBands)
	if err := l.FrameBands(d.x, ks, bd); err != nil {
		return err
	}
	d.sum.Distances = append(d.sum.Distances, dist)
	d.sum.KS = append(d.sum.KS, ks)
	d.sum.BOverDepth = append(d.sum.BOverDepth, bd)
	return nil
}

// quantileSorted is the nearest-rank p-quantile of sorted v.
func quantileSorted(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	return v[int(math.Round(p*float64(len(v)-1)))]
}

// median of v (not modified).
func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return quantileSorted(s, 0.5)
}

// mergeDomain concatenates the shards' per-frame values; the limits must
// agree (the AuxUE spec's sha256 already does).
func mergeDomain(sums []Named) (*DomainSummary, error) {
	var m *DomainSummary
	for _, n := range sums {
		d := n.Summary.Domain
		if d == nil {
			continue
		}
		if m == nil {
			c := *d
			c.Distances, c.KS, c.BOverDepth = nil, nil, nil
			m = &c
		} else if d.Limit != m.Limit || d.Statistic != m.Statistic || !slices.Equal(d.KSP95, m.KSP95) || !slices.Equal(d.BOverDepthP95, m.BOverDepthP95) {
			return nil, fmt.Errorf("calibrate merge: %s measured against another domain record (limit %g, %s) than the others (%g, %s)",
				n.Name, d.Limit, d.Statistic, m.Limit, m.Statistic)
		}
		m.Distances = append(m.Distances, d.Distances...)
		m.KS = append(m.KS, d.KS...)
		m.BOverDepth = append(m.BOverDepth, d.BOverDepth...)
	}
	return m, nil
}

// DomainVerdict is what CheckDomain found.
type DomainVerdict struct {
	Frames, Outside int
	// MedianDistance of the data, against the record's Limit and Median.
	MedianDistance, Limit, DomainMedian float64
	// KSBands and BOverDepthBands are the bands whose median frame is
	// above the record's in-domain p95 (the values that move tau_e and
	// tau_a), with the two numbers each.
	KSBands, BOverDepthBands []BandExcess
}

// BandExcess is one map band whose calibration frames' median exceeds the
// in-domain p95.
type BandExcess struct {
	Band           int
	Median, DomP95 float64
}

// CheckDomain compares the calibration frames with the AuxUE's
// training-domain record. It refuses (wrapping ErrOutsideDomain, with the
// numbers and the next step):
//
//   - data outside the domain: more than DomainMaxOutside of the frames
//     have a distance above the record's in-domain p99 (Limit);
//   - data that move tau_e or tau_a beyond what in-domain frames support:
//     in some map band, the median frame's mean K/S (or b/depth) is above
//     the p95 of the record's in-domain frames, so that thresholds set at
//     the data's high quantiles would sit above what any ordinary
//     training-domain frame reaches, and silence the alarms on frames
//     like these.
//
// In-domain frames pass both: their distances exceed Limit with
// probability DomainFAR and their band medians sit near the record's p50.
func CheckDomain(d *DomainSummary) (DomainVerdict, error) {
	v := DomainVerdict{Frames: len(d.Distances), Limit: d.Limit, DomainMedian: d.Median}
	if v.Frames == 0 {
		return v, nil
	}
	for _, x := range d.Distances {
		if x > d.Limit {
			v.Outside++
		}
	}
	v.MedianDistance = medianOf(d.Distances)
	band := func(rows [][]float64, p95 []float64) []BandExcess {
		var out []BandExcess
		for b := range p95 {
			col := make([]float64, len(rows))
			for i, r := range rows {
				col[i] = r[b]
			}
			if m := medianOf(col); m > p95[b] {
				out = append(out, BandExcess{Band: b, Median: m, DomP95: p95[b]})
			}
		}
		return out
	}
	v.KSBands, v.BOverDepthBands = band(d.KS, d.KSP95), band(d.BOverDepth, d.BOverDepthP95)
	var why []string
	if float64(v.Outside) > DomainMaxOutside*float64(v.Frames) {
		why = append(why, fmt.Sprintf("%d of %d frames (%.0f%%) are farther from the training domain than %.0f%% of its held-out frames "+
			"(%s distance above %.3g; median %.3g, in the domain %.3g)",
			v.Outside, v.Frames, 100*float64(v.Outside)/float64(v.Frames), 100*(1-DomainFAR), d.Statistic, d.Limit, v.MedianDistance, d.Median))
	}
	for _, e := range []struct {
		name, tau string
		bands     []BandExcess
	}{{"K/S", "tau_e", v.KSBands}, {"b/depth", "tau_a", v.BOverDepthBands}} {
		if len(e.bands) == 0 {
			continue
		}
		var parts []string
		for _, b := range e.bands {
			parts = append(parts, fmt.Sprintf("band %d: median %.3g > p95 %.3g", b.Band, b.Median, b.DomP95))
		}
		why = append(why, fmt.Sprintf("they would move %s beyond what in-domain frames support: the median frame's %s is above the "+
			"in-domain p95 (%s)", e.tau, e.name, strings.Join(parts, "; ")))
	}
	if len(why) == 0 {
		return v, nil
	}
	return v, fmt.Errorf("%w: %s (record: %d held-out frames, %s). Thresholds set on these frames would silence the alarms on frames like them. "+
		"Next step: train the AuxUE on this camera's data (didoedge train auxue --data DIR, docs/training.md), then calibrate with it; "+
		"or pass --force to calibrate anyway", ErrOutsideDomain, strings.Join(why, "; "), d.RecordFrames, d.RecordSource)
}
