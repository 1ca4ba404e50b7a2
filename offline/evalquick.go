package offline

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// QuickConfig configures QuickEval.
type QuickConfig struct {
	// Data is a data set on disk (dataset.Open: sim render layout,
	// KITTI, NYU); Indoor an optional second one whose ground-truth pixels
	// are the positives of the data-set-change AUC.
	Data, Indoor       string
	Layout, KITTIDepth string
	// DataFS, IndoorFS and KITTIDepthFS, when set, read those data sets
	// (an S3 prefix); the strings above then only name them.
	DataFS, IndoorFS, KITTIDepthFS fs.FS
	// Models holds depth.onnx, depth.yaml, auxue.onnx and auxue.yaml; the
	// four files below, when set, override it (any depth model and its
	// AuxUE).
	Models                                       string
	DepthModel, DepthSpec, AuxUEModel, AuxUESpec string
	Inference                                    onnxrt.Config
	// Split of Data to evaluate: a split name (train, val, test), all
	// (every frame; use it for a data set rendered with its own seed,
	// which no training saw), or a split file.
	Split string
	// MaxFrames and MaxIndoor bound the frames used (0 = all).
	MaxFrames, MaxIndoor int
	// SparsStep is the sparsification step (0 = 5%).
	SparsStep float64
	Log       *slog.Logger

	// shard, when set, restricts the run to a slice of the listing and
	// fills stats (QuickShard).
	shard *quickShard
}

// QuickResult holds the headline figures; JSON names are the CLI's.
type QuickResult struct {
	AbsRel    float64 `json:"absrel"`     // depth AbsRel on ground-truth pixels (per-image mean)
	SkyAUC    float64 `json:"sky_auc"`    // DIDO epistemic: sky pixels (positive) vs ground-truth pixels, pooled over frames
	SkyAUPR   float64 `json:"sky_aupr"`   // average precision of the same
	IndoorAUC float64 `json:"indoor_auc"` // DIDO epistemic: indoor GT pixels (positive) vs outdoor GT pixels; NaN without --indoor
	AURGRMSE  float64 `json:"aurg_rmse"`  // Laplace b: AURG of RMSE (per-image mean)
	// NoGTAUC: DIDO epistemic, pixels without ground truth (sky and
	// anything the LiDAR misses; positive) vs pixels with it, pooled; the
	// labels every data set has.
	NoGTAUC float64 `json:"no_gt_auc"`

	// Per-image variants of the sky figures: AUC / AUPR within each image
	// (sky vs GT pixels of that image), averaged over images with both.
	SkyAUCPerImage  float64 `json:"sky_auc_per_image"`
	SkyAUPRPerImage float64 `json:"sky_aupr_per_image"`

	AUSERMSE   float64 `json:"ause_rmse"`
	AURGAbsRel float64 `json:"aurg_absrel"`
	AUSEAbsRel float64 `json:"ause_absrel"`
	SkyAll     float64 `json:"sky_all"`     // DIDO epistemic, per-image mean
	UCE        float64 `json:"uce_laplace"` // Laplace b against |d - y| in metres, pooled over frames
	RMSE       float64 `json:"rmse"`
	Delta1     float64 `json:"delta1"`
	Frames     int     `json:"frames"`
	Indoor     int     `json:"indoor_frames"`
	// Relative is set for a relative depth model: every frame was aligned
	// to its ground truth (scale and shift in inverse depth) before the
	// depth metrics, and b is the relative b times the aligned depth.
	Relative bool `json:"relative"`

	// Confidence is the meaning of the depth model's own confidence output
	// ("" without one); the Conf figures are those above with its read-out
	// u (runtime/infer ConfidenceSpec) in place of the Laplace b
	// (sparsification) and of K/S (AUCs), NaN without a confidence output
	// (in shard mode: QuickStats' Conf sums). Pixels whose u is NaN are
	// left out of them.
	Confidence     string  `json:"confidence"`
	ConfAUSERMSE   float64 `json:"confidence_ause_rmse"`
	ConfAURGRMSE   float64 `json:"confidence_aurg_rmse"`
	ConfAUSEAbsRel float64 `json:"confidence_ause_absrel"`
	ConfAURGAbsRel float64 `json:"confidence_aurg_absrel"`
	ConfSkyAUC     float64 `json:"confidence_sky_auc"`
	ConfIndoorAUC  float64 `json:"confidence_indoor_auc"`
	ConfNoGTAUC    float64 `json:"confidence_no_gt_auc"`
}

// quickFiles resolves the four model files of cfg.
func (cfg QuickConfig) files() (depth, depthSpec, aux, auxSpec string) {
	pick := func(v, name string) string {
		if v != "" {
			return v
		}
		return filepath.Join(cfg.Models, name)
	}
	return pick(cfg.DepthModel, "depth.onnx"), pick(cfg.DepthSpec, "depth.yaml"), pick(cfg.AuxUEModel, "auxue.onnx"), pick(cfg.AuxUESpec, "auxue.yaml")
}

// OpenModelPair opens a depth model and its AuxUE with their IO specs
// (runtime/infer.Models), the path every offline command shares.
func OpenModelPair(ctx context.Context, depth, depthSpec, aux, auxSpec string, inf onnxrt.Config, log *slog.Logger) (*infer.Models, error) {
	ds, err := ReadSpec(depthSpec, infer.KindDepth)
	if err != nil {
		return nil, err
	}
	as, err := ReadSpec(auxSpec, infer.KindAuxUE)
	if err != nil {
		return nil, err
	}
	return infer.OpenModels(ctx, infer.ModelsConfig{Depth: depth, DepthSpec: ds, AuxUE: aux, AuxUESpec: as, Inference: inf,
		AuxInputs:     infer.DefaultAuxInputs(ds, as),
		DepthSpecFile: depthSpec, AuxUESpecFile: auxSpec}, log)
}

// QuickEval runs both models through ONNX Runtime on the data sets and
// computes the figures of QuickResult at the frames' resolution.
func QuickEval(ctx context.Context, cfg QuickConfig) (QuickResult, error) {
	nan := math.NaN()
	res := QuickResult{IndoorAUC: nan, ConfAUSERMSE: nan, ConfAURGRMSE: nan, ConfAUSEAbsRel: nan, ConfAURGAbsRel: nan,
		ConfSkyAUC: nan, ConfIndoorAUC: nan, ConfNoGTAUC: nan}
	if cfg.Split == "" {
		cfg.Split = dataset.SplitAll
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	frames, err := openDataFrames(dataset.Source{Dir: cfg.Data, FS: cfg.DataFS, Layout: cfg.Layout, KITTIDepth: cfg.KITTIDepth, KITTIDepthFS: cfg.KITTIDepthFS}, cfg.Split, 0)
	if err != nil {
		return res, fmt.Errorf("eval: %w", err)
	}
	if cfg.MaxFrames > 0 && len(frames.items) > cfg.MaxFrames {
		frames.items = frames.items[:cfg.MaxFrames]
	}
	var ind *dataFrames
	if cfg.Indoor != "" {
		if ind, err = openDataFrames(dataset.Source{Dir: cfg.Indoor, FS: cfg.IndoorFS}, dataset.SplitAll, 0); err != nil {
			return res, fmt.Errorf("eval: indoor: %w", err)
		}
		if cfg.MaxIndoor > 0 && len(ind.items) > cfg.MaxIndoor {
			ind.items = ind.items[:cfg.MaxIndoor]
		}
	}
	st := cfg.shard
	if st != nil {
		if err := st.slice(frames, ind); err != nil {
			return res, err
		}
	}
	d, ds, a, as := cfg.files()
	models, err := OpenModelPair(ctx, d, ds, a, as, cfg.Inference, log)
	if err != nil {
		return res, err
	}
	defer models.Close()
	res.Relative = models.Relative()
	if st != nil {
		st.stats.Relative = res.Relative
	}
	// The native confidence's figures, beside the AuxUE's.
	conf := confidenceEval{}
	if c := models.DepthSession().Spec().Confidence; c != nil {
		res.Confidence, conf.on = c.Meaning, true
		if st != nil {
			conf.stats = st.stats
			st.stats.Confidence = c.Meaning
		}
	}
	var (
		dq            metrics.DepthMean
		sp            = metrics.Sparsifier{Step: cfg.SparsStep}
		rmseM, absM   metrics.SparsMean
		sky, indoor   metrics.BinaryScores
		nogt, skyImg  metrics.BinaryScores
		aucImg, apImg float64
		nImg          int
		uce           metrics.UCE
		skyAll        float64
		skyImgs       int
		allErr, allB  []float32
		depth, scale  []float32
		skyMask       []bool
		gtMask        []bool
		noGTMask      []bool
		semantics     bool
	)
	// view returns the frame's metric depth and Laplace b: as they come
	// for a metric model; aligned to the ground truth (and b times the
	// aligned depth) for a relative one.
	view := func(s *dataset.Sample, m infer.Maps) ([]float32, []float32, error) {
		if !m.Relative {
			return m.Depth, m.Scale, nil
		}
		if len(depth) != len(m.Depth) {
			depth, scale = make([]float32, len(m.Depth)), make([]float32, len(m.Depth))
		}
		al, err := metrics.AlignInverseDepth(m.Depth, s.Sparse)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		al.Apply(m.Depth, depth, float64(metrics.KITTIRange.Max))
		for i, v := range depth {
			scale[i] = m.Scale[i] * v
		}
		return depth, scale, nil
	}
	var tm infer.StageTimes
	err = infer.InferFrames(ctx, models, len(frames.items), frames.Frame, &tm, func(_ int, s *dataset.Sample, m infer.Maps, _ []uint8, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		d, b, err := view(s, m)
		if err != nil {
			return err
		}
		epis := m.Epistemic
		q, err := metrics.Depth(d, s.Sparse, metrics.KITTIRange)
		if err != nil {
			return err
		}
		dq.Add(q)
		r, err := sp.Evaluate(d, s.Sparse, b, metrics.SparsRMSE)
		if err != nil {
			return err
		}
		rmseM.Add(r)
		r2, err := sp.Evaluate(d, s.Sparse, b, metrics.SparsAbsRel)
		if err != nil {
			return err
		}
		absM.Add(r2)
		if err := conf.frame(&sp, d, s, m.Confidence); err != nil {
			return fmt.Errorf("%s: confidence: %w", s.Name, err)
		}
		if st != nil {
			st.stats.frame(q, r, r2)
		}
		n := len(s.Sparse)
		if len(gtMask) != n {
			skyMask, gtMask, noGTMask = make([]bool, n), make([]bool, n), make([]bool, n)
		}
		for i := range gtMask {
			gtMask[i] = s.Sparse[i] > 0
			noGTMask[i] = !gtMask[i]
			skyMask[i] = s.Semantic != nil && s.Semantic[i] == metrics.SkyClass
			if gtMask[i] {
				allErr = append(allErr, float32(math.Abs(float64(d[i]-s.Sparse[i]))))
				allB = append(allB, b[i])
				if st != nil {
					st.stats.uce(allErr[len(allErr)-1], b[i])
				}
			}
		}
		if st != nil {
			st.stats.NoGT.AddMasked(epis, noGTMask, true)
			st.stats.NoGT.AddMasked(epis, gtMask, false)
			st.stats.IndoorScores.AddMasked(epis, gtMask, false)
		}
		if _, err := nogt.AddMasked(epis, noGTMask, true); err != nil {
			return err
		}
		if _, err := nogt.AddMasked(epis, gtMask, false); err != nil {
			return err
		}
		if _, err := indoor.AddMasked(epis, gtMask, false); err != nil {
			return err
		}
		if s.Semantic != nil {
			semantics = true
			if st != nil {
				st.stats.Semantics = true
				st.stats.Sky.AddMasked(epis, skyMask, true)
				st.stats.Sky.AddMasked(epis, gtMask, false)
			}
			if _, err := sky.AddMasked(epis, skyMask, true); err != nil {
				return err
			}
			if _, err := sky.AddMasked(epis, gtMask, false); err != nil {
				return err
			}
			skyImg.Reset()
			if _, err := skyImg.AddMasked(epis, skyMask, true); err != nil {
				return err
			}
			if _, err := skyImg.AddMasked(epis, gtMask, false); err != nil {
				return err
			}
			if p, n := skyImg.Counts(); p > 0 && n > 0 {
				a, err := skyImg.AUC()
				if err != nil {
					return err
				}
				ap, err := skyImg.AUPR()
				if err != nil {
					return err
				}
				aucImg, apImg, nImg = aucImg+a, apImg+ap, nImg+1
				if st != nil {
					st.stats.SkyAUCImg, st.stats.SkyAPImg, st.stats.SkyImages = st.stats.SkyAUCImg+a, st.stats.SkyAPImg+ap, st.stats.SkyImages+1
				}
			}
			v, ok, err := metrics.SkyAll(epis, s.Semantic, metrics.SkyClass)
			if err != nil {
				return err
			}
			if ok {
				skyAll += v
				skyImgs++
				if st != nil {
					st.stats.SkyAll, st.stats.SkyAllImages = st.stats.SkyAll+v, st.stats.SkyAllImages+1
				}
			}
		}
		res.Frames++
		return nil
	})
	if err != nil {
		return res, err
	}
	if st != nil {
		st.stats.Frames = res.Frames
	}
	res.SkyAUCPerImage, res.SkyAUPRPerImage = math.NaN(), math.NaN()
	if nImg > 0 {
		res.SkyAUCPerImage, res.SkyAUPRPerImage = aucImg/float64(nImg), apImg/float64(nImg)
	}
	mq := dq.Mean()
	res.AbsRel, res.RMSE, res.Delta1 = mq.AbsRel, mq.RMSE, mq.Delta1
	res.AUSERMSE, res.AURGRMSE, _ = rmseM.Mean()
	res.AUSEAbsRel, res.AURGAbsRel, _ = absM.Mean()
	res.SkyAll = math.NaN()
	if skyImgs > 0 {
		res.SkyAll = skyAll / float64(skyImgs)
	}
	if res.UCE, err = uce.Evaluate(allErr, allB, nil); err != nil {
		return res, err
	}
	res.SkyAUC, res.SkyAUPR, res.NoGTAUC = math.NaN(), math.NaN(), math.NaN()
	if p, n := nogt.Counts(); p > 0 && n > 0 {
		if res.NoGTAUC, err = nogt.AUC(); err != nil {
			return res, err
		}
	}
	if p, n := sky.Counts(); semantics && p > 0 && n > 0 {
		if res.SkyAUC, err = sky.AUC(); err != nil {
			return res, fmt.Errorf("sky AUC: %w", err)
		}
		if res.SkyAUPR, err = sky.AUPR(); err != nil {
			return res, fmt.Errorf("sky AUPR: %w", err)
		}
	}
	if err := conf.finish(&res); err != nil {
		return res, err
	}
	if ind == nil {
		return res, nil
	}
	err = infer.InferFrames(ctx, models, len(ind.items), ind.Frame, &tm, func(_ int, s *dataset.Sample, m infer.Maps, _ []uint8, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		if len(gtMask) != len(s.Sparse) {
			gtMask = make([]bool, len(s.Sparse))
		}
		for i := range gtMask {
			gtMask[i] = s.Sparse[i] > 0
		}
		if _, err := indoor.AddMasked(m.Epistemic, gtMask, true); err != nil {
			return err
		}
		if conf.on {
			if _, err := conf.indoor.AddMasked(m.Confidence, gtMask, true); err != nil {
				return err
			}
			if conf.stats != nil {
				conf.stats.ConfIndoor.AddMasked(m.Confidence, gtMask, true)
			}
		}
		if st != nil {
			st.stats.IndoorScores.AddMasked(m.Epistemic, gtMask, true)
			st.stats.Indoor++
		}
		res.Indoor++
		return nil
	})
	if err != nil {
		return res, err
	}
	if p, n := indoor.Counts(); p == 0 || n == 0 {
		return res, nil // a shard without indoor frames, or without outdoor ones
	}
	if res.IndoorAUC, err = indoor.AUC(); err != nil {
		return res, fmt.Errorf("indoor AUC: %w", err)
	}
	if p, n := conf.indoor.Counts(); conf.on && p > 0 && n > 0 {
		if res.ConfIndoorAUC, err = conf.indoor.AUC(); err != nil {
			return res, fmt.Errorf("confidence indoor AUC: %w", err)
		}
	}
	return res, nil
}

// confidenceEval accumulates the native confidence's figures: the
// sparsification curves with u as the uncertainty, and u as the score of
// the sky, no-ground-truth and data-set-change AUCs, the pixel classes
// of the AuxUE's figures.
type confidenceEval struct {
	on                bool
	rmse, abs         metrics.SparsMean
	sky, nogt, indoor metrics.BinaryScores
	semantics         bool
	gt, noGT, skyMask []bool
	// stats, in shard mode, gets the same sums in mergeable form.
	stats *QuickStats
}

// frame adds one outdoor frame (d the depth the AuxUE's figures use, u
// the confidence read-out at the frame's size).
func (c *confidenceEval) frame(sp *metrics.Sparsifier, d []float32, s *dataset.Sample, u []float32) error {
	if !c.on {
		return nil
	}
	if len(u) != len(s.Sparse) {
		return fmt.Errorf("%d confidence values for %d pixels", len(u), len(s.Sparse))
	}
	r, err := sp.Evaluate(d, s.Sparse, u, metrics.SparsRMSE)
	if err != nil {
		return err
	}
	c.rmse.Add(r)
	r2, err := sp.Evaluate(d, s.Sparse, u, metrics.SparsAbsRel)
	if err != nil {
		return err
	}
	c.abs.Add(r2)
	n := len(u)
	if len(c.gt) != n {
		c.gt, c.noGT, c.skyMask = make([]bool, n), make([]bool, n), make([]bool, n)
	}
	for i := range c.gt {
		c.gt[i] = s.Sparse[i] > 0
		c.noGT[i] = !c.gt[i]
		c.skyMask[i] = s.Semantic != nil && s.Semantic[i] == metrics.SkyClass
	}
	for _, add := range []struct {
		b    *metrics.BinaryScores
		mask []bool
		pos  bool
	}{{&c.nogt, c.noGT, true}, {&c.nogt, c.gt, false}, {&c.indoor, c.gt, false}} {
		if _, err := add.b.AddMasked(u, add.mask, add.pos); err != nil {
			return err
		}
	}
	if s.Semantic != nil {
		c.semantics = true
		if _, err := c.sky.AddMasked(u, c.skyMask, true); err != nil {
			return err
		}
		if _, err := c.sky.AddMasked(u, c.gt, false); err != nil {
			return err
		}
	}
	if q := c.stats; q != nil {
		var a, b metrics.SparsMean
		a.Add(r)
		b.Add(r2)
		q.ConfSparsRMSE.Merge(a)
		q.ConfSparsAbsRel.Merge(b)
		q.ConfNoGT.AddMasked(u, c.noGT, true)
		q.ConfNoGT.AddMasked(u, c.gt, false)
		q.ConfIndoor.AddMasked(u, c.gt, false)
		if s.Semantic != nil {
			q.ConfSky.AddMasked(u, c.skyMask, true)
			q.ConfSky.AddMasked(u, c.gt, false)
		}
	}
	return nil
}

// finish writes the outdoor figures into res.
func (c *confidenceEval) finish(res *QuickResult) error {
	if !c.on {
		return nil
	}
	res.ConfAUSERMSE, res.ConfAURGRMSE, _ = c.rmse.Mean()
	res.ConfAUSEAbsRel, res.ConfAURGAbsRel, _ = c.abs.Mean()
	var err error
	if p, n := c.nogt.Counts(); p > 0 && n > 0 {
		if res.ConfNoGTAUC, err = c.nogt.AUC(); err != nil {
			return fmt.Errorf("confidence no-GT AUC: %w", err)
		}
	}
	if p, n := c.sky.Counts(); c.semantics && p > 0 && n > 0 {
		if res.ConfSkyAUC, err = c.sky.AUC(); err != nil {
			return fmt.Errorf("confidence sky AUC: %w", err)
		}
	}
	return nil
}

// WriteSideBySide prints the AuxUE's and the native confidence's figures
// as a table (nothing without a confidence output): one row per signal.
func (r QuickResult) WriteSideBySide(w io.Writer) {
	if r.Confidence == "" {
		return
	}
	f := func(v float64) string {
		if math.IsNaN(v) {
			return "-"
		}
		return fmt.Sprintf("%.4g", v)
	}
	fmt.Fprintf(w, "\n%-34s %10s %10s %12s %12s %8s %10s %9s\n", "signal", "AUSE-RMSE", "AURG-RMSE", "AUSE-AbsRel", "AURG-AbsRel", "sky AUC", "indoor AUC", "no-GT AUC")
	fmt.Fprintf(w, "%-34s %10s %10s %12s %12s %8s %10s %9s\n", "AuxUE (Laplace b; K/S for AUCs)", f(r.AUSERMSE), f(r.AURGRMSE), f(r.AUSEAbsRel), f(r.AURGAbsRel), f(r.SkyAUC), f(r.IndoorAUC), f(r.NoGTAUC))
	fmt.Fprintf(w, "%-34s %10s %10s %12s %12s %8s %10s %9s\n", "native confidence ("+r.Confidence+")", f(r.ConfAUSERMSE), f(r.ConfAURGRMSE), f(r.ConfAUSEAbsRel), f(r.ConfAURGAbsRel), f(r.ConfSkyAUC), f(r.ConfIndoorAUC), f(r.ConfNoGTAUC))
}

// Write prints the result: a line per figure, or JSON (asJSON). JSON has
// no NaN: figures that could not be computed are written as null.
func (r QuickResult) Write(w io.Writer, asJSON bool) error {
	fields := map[string]any{}
	var order []string
	v := reflect.ValueOf(r)
	for i := 0; i < v.NumField(); i++ {
		name := strings.Split(v.Type().Field(i).Tag.Get("json"), ",")[0]
		val := v.Field(i).Interface()
		if f, ok := val.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			val = nil
		}
		fields[name] = val
		order = append(order, name)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(fields)
	}
	for _, name := range order {
		fmt.Fprintf(w, "%-14s %v\n", name, fields[name])
	}
	return nil
}
