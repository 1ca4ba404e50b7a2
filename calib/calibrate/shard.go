package calibrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/internal/manifest"
	"github.com/didoedge/didoedge/runtime/infer"
)

// SummaryFormat names the shard summary's format and version.
const SummaryFormat = "didoedge-calibrate-shard/1"

// ShardOptions select the frames of one shard.
type ShardOptions struct {
	// Models are the depth model and the AuxUE with their specs; Alerts
	// gives the zones and the base calibration (levels, and the scale
	// correction kept without ground truth).
	Models infer.ModelsConfig
	Alerts alerts.Config
	// Inputs are the data sets; the listing is every frame of their
	// Split (the first MaxFrames of each when > 0), sorted by data set
	// directory and item, and the shard takes the slice ShardRange(n,
	// Index, Count).
	Inputs       []Input
	Split        string // default "val"
	MaxFrames    int
	Index, Count int // Count 0 means 1 (the whole listing)
	Log          *slog.Logger
}

// ModelIdentity identifies the models a summary was computed with: the
// sha256 of both ONNX files and of both IO specs (their parsed form as
// JSON, so an inline spec and a spec file that say the same agree; the
// AuxUE's spec includes its input list and depth scale).
type ModelIdentity struct {
	Depth       string `json:"depth"`
	DepthSHA256 string `json:"depth_sha256"`
	DepthSpec   string `json:"depth_spec_sha256"`
	AuxUE       string `json:"auxue"`
	AuxUESHA256 string `json:"auxue_sha256"`
	AuxUESpec   string `json:"auxue_spec_sha256"`
}

// DataIdentity is one data set's part of a shard.
type DataIdentity struct {
	Source string `json:"source"`
	Layout string `json:"layout"`
	Split  string `json:"split"`
	// Frames is how many of its frames the shard took, First and Last the
	// first and last of them, ItemsSHA256 the sha256 of their keys.
	Frames      int    `json:"frames"`
	First       string `json:"first,omitempty"`
	Last        string `json:"last,omitempty"`
	ItemsSHA256 string `json:"items_sha256"`
}

// Summary is what one shard found, everything the merge needs and nothing
// that depends on the target false-alarm rate or the coverage (the merge
// chooses those): exact fixed-bin histograms (Hist) of K/S and b/depth
// overall and per zone, of |e|/b on ground-truth pixels for the scale
// correction, the UCE statistics, and per frame and zone the value above
// which the zone would open a warn event (exact; the event bound and the
// frame alarm rates use them). Histograms add, the per-frame values
// concatenate, so any split of the listing merges into the whole.
type Summary struct {
	Format       string        `json:"format"`
	MantissaBits int           `json:"mantissa_bits"`
	Models       ModelIdentity `json:"models"`
	Relative     bool          `json:"relative"`
	// Zones are the zone names in order; ZonesSHA256 identifies the
	// zones' polygons and ignore areas.
	Zones       []string `json:"zones"`
	ZonesSHA256 string   `json:"zones_sha256"`
	// Base is the config's calibration: levels, and the scale correction
	// kept without ground truth. Its ood_fraction and aleatoric_fraction
	// warn entries define the per-frame values.
	Base    alerts.Calibration `json:"base_calibration"`
	Listing ListingIdentity    `json:"listing"`
	Data    []DataIdentity     `json:"data"`

	Frames   int64 `json:"frames"`
	Skipped  int64 `json:"skipped_frames"` // non-finite model outputs
	Pixels   int64 `json:"pixels"`
	GTPixels int64 `json:"gt_pixels"`

	KS         Hist   `json:"ks"`
	KSZones    []Hist `json:"ks_zones"`
	Ratio      Hist   `json:"b_over_depth"` // before the scale correction; relative b for a relative model
	RatioZones []Hist `json:"b_over_depth_zones"`
	// ErrOverB is |e|/b over ground-truth pixels with b > 0; ZeroB counts
	// those with b = 0, ZeroBZeroErr those of them with e = 0 (inside any
	// interval).
	ErrOverB     Hist             `json:"abs_err_over_b"`
	ZeroB        int64            `json:"zero_b"`
	ZeroBZeroErr int64            `json:"zero_b_zero_err"`
	UCE          metrics.UCEStats `json:"uce"`
	// QuietKS[f][z] is, for frame f and zone z, the m-th largest K/S of
	// the zone (m = ceil(enter n), enter the ood_fraction warn entry):
	// the zone stays below warn iff tau_e >= it. -1: no valid pixel.
	// QuietRatio is the same for b/depth and aleatoric_fraction. Nil
	// when the criterion is not used.
	QuietKS    [][]float32 `json:"frame_quiet_ks,omitempty"`
	QuietRatio [][]float32 `json:"frame_quiet_b_over_depth,omitempty"`
	// Confidence is the depth model's own confidence read-out u over the
	// valid pixels with a finite u, overall and per zone, u < 0 counted as
	// 0 (a read-out below zero, more confident than exact, is below any
	// threshold a false-alarm rate under 1/2 gives); QuietConfidence the
	// per-frame values of confidence_fraction. Empty for a depth model
	// without a confidence output.
	Confidence      Hist        `json:"confidence"`
	ConfidenceZones []Hist      `json:"confidence_zones,omitempty"`
	QuietConfidence [][]float32 `json:"frame_quiet_confidence,omitempty"`
	// AuxUEValidation is the AuxUE spec's record of its own validation
	// (nil for older AuxUEs): the merge compares the data with it
	// (CheckStranger).
	AuxUEValidation *infer.AuxUEValidation `json:"auxue_validation,omitempty"`
	// Domain is the frames measured against the AuxUE's training-domain
	// record (nil when its spec has none: the data cannot be checked).
	Domain *DomainSummary `json:"domain,omitempty"`
}

// ListingIdentity names the listing a shard was cut from.
type ListingIdentity struct {
	SHA256 string `json:"sha256"`
	Frames int    `json:"frames"`
	Index  int    `json:"shard_index"`
	Count  int    `json:"shard_count"`
}

// specSHA256 hashes v's JSON form.
func specSHA256(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// modelIdentity hashes the config's models and specs.
func modelIdentity(mc infer.ModelsConfig) (ModelIdentity, error) {
	id := ModelIdentity{Depth: mc.Depth, AuxUE: mc.AuxUE}
	var err error
	if id.DepthSHA256, err = manifest.FileSHA256(mc.Depth); err != nil {
		return id, fmt.Errorf("calibrate: depth model identity: %w", err)
	}
	if id.AuxUESHA256, err = manifest.FileSHA256(mc.AuxUE); err != nil {
		return id, fmt.Errorf("calibrate: auxue model identity: %w", err)
	}
	if id.DepthSpec, err = specSHA256(mc.DepthSpec); err != nil {
		return id, fmt.Errorf("calibrate: depth spec identity: %w", err)
	}
	if id.AuxUESpec, err = specSHA256(struct {
		Spec       infer.IOSpec
		Inputs     []string
		DepthScale float32
	}{mc.AuxUESpec, mc.AuxInputs, mc.DepthScale}); err != nil {
		return id, fmt.Errorf("calibrate: auxue spec identity: %w", err)
	}
	return id, nil
}

// Shard runs both models over the shard's frames and summarises them.
func Shard(ctx context.Context, o ShardOptions) (*Summary, error) {
	if o.Split == "" {
		o.Split = "val"
	}
	if o.Count == 0 {
		o.Count = 1
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	base, err := o.Alerts.LoadCalibrationFor()
	if err != nil {
		return nil, err
	}
	if o.Models.DepthSpec.Confidence != nil && base.Levels.ConfidenceFraction == nil {
		// A depth model with its own confidence gets the criterion, with
		// the aleatoric criterion's default levels; tau_c comes from the
		// data like tau_a.
		base.Levels.ConfidenceFraction = DefaultConfidenceCriterion()
	}
	zones, ignore, err := o.Alerts.ZoneSet.Resolve("alerts")
	if err != nil {
		return nil, err
	}
	l, err := listInputs(o.Inputs, o.Split, o.MaxFrames)
	if err != nil {
		return nil, err
	}
	lo, hi, err := ShardRange(len(l.entries), o.Index, o.Count)
	if err != nil {
		return nil, err
	}
	ids, err := modelIdentity(o.Models)
	if err != nil {
		return nil, err
	}
	zsha, err := specSHA256(struct{ Zones, Ignore []alerts.Zone }{zones, ignore})
	if err != nil {
		return nil, err
	}
	sum := &Summary{Format: SummaryFormat, MantissaBits: MantissaBits, Models: ids, ZonesSHA256: zsha, Base: base,
		Listing:    ListingIdentity{SHA256: l.sha256, Frames: len(l.entries), Index: o.Index, Count: o.Count},
		KSZones:    make([]Hist, len(zones)),
		RatioZones: make([]Hist, len(zones)),
	}
	if o.Models.DepthSpec.Confidence != nil {
		sum.ConfidenceZones = make([]Hist, len(zones))
	}
	if info := o.Models.AuxUESpec.AuxUE; info != nil {
		sum.AuxUEValidation = info.Validation
	}
	dom, err := newDomainScanner(&o.Models.AuxUESpec)
	if err != nil {
		return nil, err
	}
	if dom != nil {
		sum.Domain = dom.sum
	}
	for _, z := range zones {
		sum.Zones = append(sum.Zones, z.Name)
	}
	mine := l.entries[lo:hi]
	sum.Data = dataIdentities(l, mine, o.Split)
	if len(mine) == 0 {
		// More shards than frames: an empty summary merges as nothing.
		o.Log.Info("calibrate shard: no frames in this shard", "index", o.Index, "count", o.Count, "listing", len(l.entries))
		return sum, nil
	}
	models, err := infer.OpenModels(ctx, o.Models, o.Log)
	if err != nil {
		return nil, err
	}
	defer models.Close()
	sum.Relative = models.Relative()
	s := scanner{sum: sum, levels: base.Levels, zones: zones, ignore: ignore, relative: sum.Relative}
	gtBySet := make([]int64, len(l.sets))
	start := time.Now()
	inW, inH := models.InputSize()
	var tm infer.StageTimes
	load := func(n int) (*dataset.Sample, error) {
		smp, err := l.sets[mine[n].src].Load(mine[n].item)
		if err != nil {
			return nil, fmt.Errorf("calibrate: %w", err)
		}
		return smp, nil
	}
	err = infer.InferFrames(ctx, models, len(mine), load, &tm, func(n int, smp *dataset.Sample, maps infer.Maps, img []uint8, err error) error {
		if errors.Is(err, infer.ErrInvalidOutput) {
			o.Log.Warn("skipping frame with non-finite model outputs", "frame", smp.Name)
			sum.Skipped++
			return nil
		}
		if err != nil {
			return fmt.Errorf("calibrate: frame %s: %w", smp.Name, err)
		}
		if dom != nil {
			// before s.frame: the domain statistics read the native maps,
			// which the relative alignment below does not touch
			if err := dom.frame(maps, img, inW, inH); err != nil {
				return fmt.Errorf("frame %s: %w", smp.Name, err)
			}
		}
		before := sum.GTPixels
		if err := s.frame(maps, smp.Sparse, smp.Width, smp.Height); err != nil {
			return err
		}
		gtBySet[mine[n].src] += sum.GTPixels - before
		if (n+1)%50 == 0 {
			o.Log.Info("calibrate", "frames", n+1, "of", len(mine), "elapsed", time.Since(start).Round(time.Second))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, ds := range l.sets {
		if ds.HasGroundTruth() && gtBySet[i] == 0 && slices.ContainsFunc(mine, func(e entry) bool { return e.src == i }) {
			return nil, fmt.Errorf("calibrate: no ground-truth pixel in the %s split of %q", o.Split, l.inputs[i].Dir)
		}
	}
	return sum, nil
}

// dataIdentities describes, per data set, the frames of the shard.
func dataIdentities(l *listing, mine []entry, split string) []DataIdentity {
	out := make([]DataIdentity, len(l.sets))
	hs := make([]interface {
		io.Writer
		Sum([]byte) []byte
	}, len(l.sets))
	for i, ds := range l.sets {
		out[i] = DataIdentity{Source: l.inputs[i].Dir, Layout: ds.Layout(), Split: split}
		hs[i] = sha256.New()
	}
	for _, e := range mine {
		d := &out[e.src]
		k := itemKey(e.item)
		if d.Frames == 0 {
			d.First = k
		}
		d.Last = k
		d.Frames++
		hs[e.src].Write([]byte(k + "\n"))
	}
	for i := range out {
		out[i].ItemsSHA256 = hex.EncodeToString(hs[i].Sum(nil))
	}
	return out
}

// scanner adds frames to a summary.
type scanner struct {
	sum      *Summary
	levels   alerts.LevelThresholds
	zones    []alerts.Zone
	ignore   []alerts.Zone
	relative bool

	raster        [][]int32
	rw, rh        int
	aligned       []float32
	zks, zra, zcf []float32
}

// frame adds one frame's maps; sparse is its ground truth (nil: none).
func (s *scanner) frame(maps infer.Maps, sparse []float32, w, h int) error {
	sum := s.sum
	if w != s.rw || h != s.rh {
		r, err := alerts.Rasterize(s.zones, s.ignore, w, h)
		if err != nil {
			return err
		}
		s.raster, s.rw, s.rh = r, w, h
	}
	// Metric depth d and the error targets: |d - y| against b for a
	// metric model; for a relative model the frame is aligned to its
	// ground truth (least squares in inverse depth) and the relative
	// error |d - y|/y is compared with the relative b.
	alignedOK := false
	if s.relative && sparse != nil {
		if len(s.aligned) != len(maps.Depth) {
			s.aligned = make([]float32, len(maps.Depth))
		}
		if a, err := metrics.AlignInverseDepth(maps.Depth, sparse); err == nil {
			a.Apply(maps.Depth, s.aligned, alignMaxDepth)
			alignedOK = true
		}
	}
	valid := func(i int) bool {
		d, e, b := maps.Depth[i], maps.Epistemic[i], maps.Scale[i]
		if s.relative {
			return d-d == 0 && e-e == 0 && b >= 0 && b-b == 0
		}
		return d > 0 && e-e == 0 && b >= 0 && b-b == 0
	}
	ratio := func(i int) float64 {
		if s.relative {
			return float64(maps.Scale[i]) // already relative to the depth
		}
		return float64(maps.Scale[i] / maps.Depth[i])
	}
	for i := range maps.Depth {
		if !valid(i) {
			continue
		}
		sum.Pixels++
		sum.KS.Add(float64(maps.Epistemic[i]))
		sum.Ratio.Add(ratio(i))
		if sparse == nil {
			continue
		}
		y := sparse[i]
		var e float64
		switch {
		case !(y > 0):
			continue
		case s.relative && alignedOK:
			e = math.Abs(float64(s.aligned[i]-y)) / float64(y)
		case !s.relative:
			e = math.Abs(float64(maps.Depth[i] - y))
		default:
			continue
		}
		b := float64(maps.Scale[i])
		sum.GTPixels++
		sum.UCE.Add(e, b)
		if b > 0 {
			sum.ErrOverB.Add(e / b)
		} else {
			sum.ZeroB++
			if e == 0 {
				sum.ZeroBZeroErr++
			}
		}
	}
	conf := maps.Confidence
	if len(sum.ConfidenceZones) != len(s.raster) {
		conf = nil // a depth model without a confidence output
	}
	uOf := func(i int32) (float64, bool) {
		u := conf[i]
		if u-u != 0 || !valid(int(i)) {
			return 0, false
		}
		return math.Max(float64(u), 0), true
	}
	if conf != nil {
		for i := range conf {
			if u, ok := uOf(int32(i)); ok {
				sum.Confidence.Add(u)
			}
		}
	}
	var qks, qra, qcf []float32
	if s.levels.OODFraction != nil {
		qks = make([]float32, len(s.raster))
	}
	if conf != nil && s.levels.ConfidenceFraction != nil {
		qcf = make([]float32, len(s.raster))
	}
	if s.levels.AleatoricFraction != nil {
		qra = make([]float32, len(s.raster))
	}
	for z, px := range s.raster {
		s.zks, s.zra = s.zks[:0], s.zra[:0]
		for _, i := range px {
			if valid(int(i)) {
				s.zks = append(s.zks, maps.Epistemic[i])
				s.zra = append(s.zra, float32(ratio(int(i))))
				sum.KSZones[z].Add(float64(maps.Epistemic[i]))
				sum.RatioZones[z].Add(ratio(int(i)))
			}
		}
		if qks != nil {
			qks[z] = quietValue(s.zks, s.levels.OODFraction.Warn.Enter)
		}
		if qra != nil {
			qra[z] = quietValue(s.zra, s.levels.AleatoricFraction.Warn.Enter)
		}
		if conf == nil {
			continue
		}
		s.zcf = s.zcf[:0]
		for _, i := range px {
			if u, ok := uOf(i); ok {
				s.zcf = append(s.zcf, float32(u))
				sum.ConfidenceZones[z].Add(u)
			}
		}
		if qcf != nil {
			qcf[z] = quietValue(s.zcf, s.levels.ConfidenceFraction.Warn.Enter)
		}
	}
	if qcf != nil {
		sum.QuietConfidence = append(sum.QuietConfidence, qcf)
	}
	if qks != nil {
		sum.QuietKS = append(sum.QuietKS, qks)
	}
	if qra != nil {
		sum.QuietRatio = append(sum.QuietRatio, qra)
	}
	sum.Frames++
	return nil
}

// DefaultConfidenceCriterion is the confidence_fraction criterion that
// calibrate adds for a depth model with a confidence output when the
// configured calibration has none: the default aleatoric_fraction levels.
func DefaultConfidenceCriterion() *alerts.Criterion {
	return &alerts.Criterion{Warn: alerts.Hysteresis{Enter: 0.15, Exit: 0.10}, Critical: alerts.Hysteresis{Enter: 0.40, Exit: 0.30}}
}

// quietValue is the m-th largest of v, m = max(ceil(enter n), 1): the zone
// keeps its fraction of values above tau below enter iff tau >= it (see
// zoneEventTau). -1 for an empty v or enter <= 0 (no bound). v is sorted
// in place.
func quietValue(v []float32, enter float64) float32 {
	n := len(v)
	if n == 0 || !(enter > 0) {
		return -1
	}
	slices.Sort(v)
	m := max(int(math.Ceil(enter*float64(n)-1e-9)), 1)
	return v[n-min(m, n)]
}
