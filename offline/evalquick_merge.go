package offline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/internal/manifest"
)

// QuickStatsFormat names QuickStats' format and version.
// Version 2 added the native confidence's sums (a version-1 file of a
// model with a confidence output lacks them, so it is refused).
const QuickStatsFormat = "didoedge-eval-quick-shard/2"

// QuickStats is eval-quick's mergeable summary of one shard: per-image
// sums (depth quality, AUSE/AURG, Sky-All, per-image sky AUC/AP), which
// merge exactly; score histograms of the pooled AUCs (metrics.ScoreHist,
// 1024 bins per octave), which merge exactly and give the AUC to within
// their tie bound; the UCE statistics (metrics.UCEStats); and for a depth
// model with a confidence output the same sparsification sums and score
// histograms with its read-out u (QuickResult's Conf figures). The listing is
// every outdoor frame, then every indoor frame, each sorted; a shard is
// the slice [i n/k, (i+1) n/k).
type QuickStats struct {
	Format  string            `json:"format"`
	Models  map[string]string `json:"models"` // sha256 of depth, depth_spec, auxue, auxue_spec
	Listing struct {
		SHA256 string `json:"sha256"`
		Frames int    `json:"frames"`
		Index  int    `json:"shard_index"`
		Count  int    `json:"shard_count"`
	} `json:"listing"`
	Frames    int  `json:"frames"`
	Indoor    int  `json:"indoor_frames"`
	Relative  bool `json:"relative"`
	Semantics bool `json:"semantics"`

	Depth        metrics.DepthSums `json:"depth"`
	SparsRMSE    metrics.SparsMean `json:"spars_rmse"`
	SparsAbsRel  metrics.SparsMean `json:"spars_absrel"`
	Sky          metrics.ScoreHist `json:"sky"`
	NoGT         metrics.ScoreHist `json:"no_gt"`
	IndoorScores metrics.ScoreHist `json:"indoor"`
	SkyAUCImg    float64           `json:"sky_auc_image_sum"`
	SkyAPImg     float64           `json:"sky_ap_image_sum"`
	SkyImages    int               `json:"sky_images"`
	SkyAll       float64           `json:"sky_all_sum"`
	SkyAllImages int               `json:"sky_all_images"`
	UCE          metrics.UCEStats  `json:"uce"`

	// Confidence is the depth model's confidence meaning ("" without
	// one); the Conf sums are the figures above with its read-out u in
	// place of the Laplace b (sparsification) and of K/S (histograms).
	Confidence      string            `json:"confidence,omitempty"`
	ConfSparsRMSE   metrics.SparsMean `json:"confidence_spars_rmse"`
	ConfSparsAbsRel metrics.SparsMean `json:"confidence_spars_absrel"`
	ConfSky         metrics.ScoreHist `json:"confidence_sky"`
	ConfNoGT        metrics.ScoreHist `json:"confidence_no_gt"`
	ConfIndoor      metrics.ScoreHist `json:"confidence_indoor"`
}

func (q *QuickStats) frame(d metrics.DepthQuality, rmse, absrel metrics.Sparsification) {
	var m metrics.DepthMean
	m.Add(d)
	q.Depth = mergeDepth(q.Depth, m.Sums())
	var a, b metrics.SparsMean
	a.Add(rmse)
	b.Add(absrel)
	q.SparsRMSE.Merge(a)
	q.SparsAbsRel.Merge(b)
}

func (q *QuickStats) uce(e, b float32) {
	if !math.IsNaN(float64(e)) && !math.IsInf(float64(e), 0) && !math.IsNaN(float64(b)) && !math.IsInf(float64(b), 0) {
		q.UCE.Add(float64(e), float64(b))
	}
}

func mergeDepth(a, b metrics.DepthSums) metrics.DepthSums {
	var m metrics.DepthMean
	m.MergeSums(a)
	m.MergeSums(b)
	return m.Sums()
}

// quickShard is QuickEval's shard mode.
type quickShard struct {
	index, count int
	stats        *QuickStats
}

func quickItemKey(it dataset.Item) string {
	return fmt.Sprintf("%s\x00%012d\x00%c\x00%s", it.Drive, it.Frame, it.Side, it.RGBPath)
}

// slice sorts both lists, names the listing and keeps the shard's part.
func (s *quickShard) slice(out, ind *dataFrames) error {
	lists := []*dataFrames{out}
	if ind != nil {
		lists = append(lists, ind)
	}
	h := sha256.New()
	n := 0
	for r, l := range lists {
		slices.SortStableFunc(l.items, func(a, b dataset.Item) int { return strings.Compare(quickItemKey(a), quickItemKey(b)) })
		for _, it := range l.items {
			fmt.Fprintf(h, "%d\x00%s\n", r, quickItemKey(it))
		}
		n += len(l.items)
	}
	if s.count < 1 || s.index < 0 || s.index >= s.count {
		return fmt.Errorf("eval-quick shard: index %d of %d: want 0 <= index < count", s.index, s.count)
	}
	lo, hi := s.index*n/s.count, (s.index+1)*n/s.count
	st := s.stats
	st.Listing.SHA256, st.Listing.Frames, st.Listing.Index, st.Listing.Count = hex.EncodeToString(h.Sum(nil)), n, s.index, s.count
	off := 0
	for _, l := range lists {
		k := len(l.items)
		a, b := max(lo-off, 0), min(hi-off, k)
		if a >= b {
			l.items = nil
		} else {
			l.items = l.items[a:b]
		}
		off += k
	}
	return nil
}

// QuickShard evaluates shard index of count of cfg's listing and returns
// its mergeable statistics.
func QuickShard(ctx context.Context, cfg QuickConfig, index, count int) (*QuickStats, error) {
	st := &QuickStats{Format: QuickStatsFormat, Models: map[string]string{}}
	d, ds, a, as := cfg.files()
	for name, f := range map[string]string{"depth": d, "depth_spec": ds, "auxue": a, "auxue_spec": as} {
		sum, err := manifest.FileSHA256(f)
		if err != nil {
			return nil, fmt.Errorf("eval-quick shard: %s identity: %w", name, err)
		}
		st.Models[name] = sum
	}
	cfg.shard = &quickShard{index: index, count: count, stats: st}
	if _, err := QuickEval(ctx, cfg); err != nil {
		return nil, err
	}
	return st, nil
}

// ReadQuickStats decodes a shard's statistics (unknown keys and another
// format are errors naming name).
func ReadQuickStats(r io.Reader, name string) (*QuickStats, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var s QuickStats
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("eval-quick summary %s: %w", name, err)
	}
	if s.Format != QuickStatsFormat {
		return nil, fmt.Errorf("eval-quick summary %s: format %q, want %q", name, s.Format, QuickStatsFormat)
	}
	return &s, nil
}

// Write writes the statistics as JSON.
func (q *QuickStats) Write(w io.Writer) error { return json.NewEncoder(w).Encode(q) }

// QuickMerged is the merged figures with the bounds of their
// approximations.
type QuickMerged struct {
	QuickResult
	// AUCBound holds, per pooled AUC, the bound on |merged - exact|
	// (metrics.ScoreHist.AUCTieBound). AUPRs use the same bins as tie
	// groups (no bound stated); UCE puts fine bins whole into UCE bins.
	AUCBound map[string]float64 `json:"auc_tie_bound"`
	Shards   int                `json:"shards"`
}

// QuickMerge adds the shards' statistics: they must come from the same
// models (sha256 of the four files) and one listing with every shard
// exactly once. names label the stats in messages.
func QuickMerge(stats []*QuickStats, names []string) (*QuickMerged, error) {
	if len(stats) == 0 {
		return nil, fmt.Errorf("eval-quick merge: no summary given")
	}
	first := stats[0]
	seen := map[int]string{}
	var m QuickStats
	var dq metrics.DepthMean
	for i, s := range stats {
		for _, k := range []string{"depth", "depth_spec", "auxue", "auxue_spec"} {
			if s.Models[k] != first.Models[k] {
				return nil, fmt.Errorf("eval-quick merge: %s has %s sha256 %s, %s has %s: summaries of different models or specs do not merge",
					names[i], k, s.Models[k], names[0], first.Models[k])
			}
		}
		if s.Listing.SHA256 != first.Listing.SHA256 || s.Listing.Count != first.Listing.Count {
			return nil, fmt.Errorf("eval-quick merge: %s is from listing %.12s in %d shards, %s from %.12s in %d",
				names[i], s.Listing.SHA256, s.Listing.Count, names[0], first.Listing.SHA256, first.Listing.Count)
		}
		if prev, dup := seen[s.Listing.Index]; dup {
			return nil, fmt.Errorf("eval-quick merge: %s and %s are both shard %d", prev, names[i], s.Listing.Index)
		}
		seen[s.Listing.Index] = names[i]
		m.Frames += s.Frames
		m.Indoor += s.Indoor
		m.Relative = m.Relative || s.Relative
		m.Semantics = m.Semantics || s.Semantics
		dq.MergeSums(s.Depth)
		m.SparsRMSE.Merge(s.SparsRMSE)
		m.SparsAbsRel.Merge(s.SparsAbsRel)
		m.Sky.Merge(&s.Sky)
		m.NoGT.Merge(&s.NoGT)
		m.IndoorScores.Merge(&s.IndoorScores)
		m.SkyAUCImg += s.SkyAUCImg
		m.SkyAPImg += s.SkyAPImg
		m.SkyImages += s.SkyImages
		m.SkyAll += s.SkyAll
		m.SkyAllImages += s.SkyAllImages
		m.UCE.Merge(&s.UCE)
		if s.Confidence != first.Confidence {
			return nil, fmt.Errorf("eval-quick merge: %s has confidence %q, %s %q", names[i], s.Confidence, names[0], first.Confidence)
		}
		m.ConfSparsRMSE.Merge(s.ConfSparsRMSE)
		m.ConfSparsAbsRel.Merge(s.ConfSparsAbsRel)
		m.ConfSky.Merge(&s.ConfSky)
		m.ConfNoGT.Merge(&s.ConfNoGT)
		m.ConfIndoor.Merge(&s.ConfIndoor)
	}
	var missing []string
	for i := range first.Listing.Count {
		if _, ok := seen[i]; !ok {
			missing = append(missing, strconv.Itoa(i))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("eval-quick merge: listing %.12s: shard(s) %s of %d missing", first.Listing.SHA256, strings.Join(missing, ", "), first.Listing.Count)
	}
	nan := math.NaN()
	r := QuickMerged{Shards: len(stats), AUCBound: map[string]float64{}}
	res := &r.QuickResult
	res.Frames, res.Indoor, res.Relative = m.Frames, m.Indoor, m.Relative
	mq := dq.Mean()
	res.AbsRel, res.RMSE, res.Delta1 = mq.AbsRel, mq.RMSE, mq.Delta1
	res.AUSERMSE, res.AURGRMSE, _ = m.SparsRMSE.Mean()
	res.AUSEAbsRel, res.AURGAbsRel, _ = m.SparsAbsRel.Mean()
	res.SkyAll, res.SkyAUCPerImage, res.SkyAUPRPerImage = nan, nan, nan
	res.ConfAUSERMSE, res.ConfAURGRMSE, res.ConfAUSEAbsRel, res.ConfAURGAbsRel = nan, nan, nan, nan
	res.ConfSkyAUC, res.ConfIndoorAUC, res.ConfNoGTAUC = nan, nan, nan
	if res.Confidence = first.Confidence; res.Confidence != "" {
		res.ConfAUSERMSE, res.ConfAURGRMSE, _ = m.ConfSparsRMSE.Mean()
		res.ConfAUSEAbsRel, res.ConfAURGAbsRel, _ = m.ConfSparsAbsRel.Mean()
		for _, a := range []struct {
			key  string
			h    *metrics.ScoreHist
			dst  *float64
			want bool
		}{{"confidence_no_gt_auc", &m.ConfNoGT, &res.ConfNoGTAUC, true}, {"confidence_sky_auc", &m.ConfSky, &res.ConfSkyAUC, m.Semantics},
			{"confidence_indoor_auc", &m.ConfIndoor, &res.ConfIndoorAUC, true}} {
			if p, n := a.h.Counts(); a.want && p > 0 && n > 0 {
				*a.dst, r.AUCBound[a.key] = a.h.AUC(), a.h.AUCTieBound()
			}
		}
	}
	if m.SkyAllImages > 0 {
		res.SkyAll = m.SkyAll / float64(m.SkyAllImages)
	}
	if m.SkyImages > 0 {
		res.SkyAUCPerImage, res.SkyAUPRPerImage = m.SkyAUCImg/float64(m.SkyImages), m.SkyAPImg/float64(m.SkyImages)
	}
	res.UCE = m.UCE.UCE(1, metrics.DefaultUCEBins)
	res.NoGTAUC, r.AUCBound["no_gt_auc"] = m.NoGT.AUC(), m.NoGT.AUCTieBound()
	res.SkyAUC, res.SkyAUPR = nan, nan
	if m.Semantics {
		res.SkyAUC, res.SkyAUPR, r.AUCBound["sky_auc"] = m.Sky.AUC(), m.Sky.AUPR(), m.Sky.AUCTieBound()
	}
	res.IndoorAUC = nan
	if p, _ := m.IndoorScores.Counts(); p > 0 {
		res.IndoorAUC, r.AUCBound["indoor_auc"] = m.IndoorScores.AUC(), m.IndoorScores.AUCTieBound()
	}
	for k, v := range r.AUCBound {
		if math.IsNaN(v) {
			delete(r.AUCBound, k)
		}
	}
	return &r, nil
}

// QuickMergeFiles reads the eval-quick shard statistics files (through
// read: a local file or an object) and merges them (QuickMerge).
func QuickMergeFiles(files []string, read func(name string) ([]byte, error)) (*QuickMerged, error) {
	var stats []*QuickStats
	for _, f := range files {
		data, err := read(f)
		if err != nil {
			return nil, fmt.Errorf("eval-quick merge: %w", err)
		}
		s, err := ReadQuickStats(bytes.NewReader(data), f)
		if err != nil {
			return nil, err
		}
		stats = append(stats, s)
	}
	return QuickMerge(stats, files)
}

// WriteJSON writes the merged figures as eval-quick --json does, with
// the AUCs' tie bounds and the number of shards.
func (m *QuickMerged) WriteJSON(w io.Writer) error {
	var buf bytes.Buffer
	if err := m.QuickResult.Write(&buf, true); err != nil {
		return err
	}
	var fields map[string]any
	if err := json.Unmarshal(buf.Bytes(), &fields); err != nil {
		return err
	}
	fields["auc_tie_bound"] = m.AUCBound
	fields["shards"] = m.Shards
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(fields)
}
