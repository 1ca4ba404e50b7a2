package offline

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"

	"github.com/didoedge/didoedge/calib/dataset"
	"github.com/didoedge/didoedge/calib/metrics"
)

// QuickConfig configures QuickEval.
type QuickConfig struct {
	// Data is a simulated outdoor data set (calib/dataset layout); Indoor an
	// optional indoor one for the data-set-change AUC.
	Data, Indoor string
	// Models holds depth.onnx, depth.yaml and auxue.onnx.
	Models  string
	Library string
	// Split of Data to evaluate: train, val, test, or all (every frame; use
	// it for a data set rendered with its own seed, which no training saw).
	Split string
	// MaxFrames and MaxIndoor bound the frames used (0 = all).
	MaxFrames, MaxIndoor int
	// SparsStep is the sparsification step (0 = 5%).
	SparsStep float64
	Log       *slog.Logger
}

// QuickResult holds the headline figures; JSON names are the CLI's.
type QuickResult struct {
	AbsRel    float64 `json:"absrel"`     // depth AbsRel on ground-truth pixels (per-image mean)
	SkyAUC    float64 `json:"sky_auc"`    // DIDO epistemic: sky pixels (positive) vs ground-truth pixels, pooled over frames
	SkyAUPR   float64 `json:"sky_aupr"`   // average precision of the same
	IndoorAUC float64 `json:"indoor_auc"` // DIDO epistemic: indoor GT pixels (positive) vs outdoor GT pixels; NaN without --indoor
	AURGRMSE  float64 `json:"aurg_rmse"`  // Laplace b: AURG of RMSE (per-image mean)

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
}

func items(d *dataset.Sim, split string) ([]dataset.Item, error) {
	if split != "all" {
		return d.Split(split)
	}
	var out []dataset.Item
	for _, dr := range d.Meta.Drives {
		for k := 0; k < dr.Count; k++ {
			out = append(out, dataset.Item{Drive: dr.Name, Frame: dr.Index(k), Side: 'l'})
		}
	}
	return out, nil
}

// QuickEval runs both models through ONNX Runtime on the data sets and
// computes the figures of QuickResult.
func QuickEval(ctx context.Context, cfg QuickConfig) (QuickResult, error) {
	res := QuickResult{IndoorAUC: math.NaN()}
	if cfg.Split == "" {
		cfg.Split = "all"
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ds, err := dataset.OpenSim(cfg.Data)
	if err != nil {
		return res, err
	}
	list, err := items(ds, cfg.Split)
	if err != nil {
		return res, fmt.Errorf("eval: %s split of %q: %w", cfg.Split, cfg.Data, err)
	}
	if cfg.MaxFrames > 0 && len(list) > cfg.MaxFrames {
		list = list[:cfg.MaxFrames]
	}
	if len(list) == 0 {
		return res, fmt.Errorf("eval: no frames in the %s split of %q", cfg.Split, cfg.Data)
	}
	depth, err := OpenDepthRunner(ctx, filepath.Join(cfg.Models, "depth.onnx"), filepath.Join(cfg.Models, "depth.yaml"), cfg.Library, log)
	if err != nil {
		return res, err
	}
	defer depth.Close()
	fc, fh, fw := depth.AuxShape()
	aux, err := OpenAuxRunner(filepath.Join(cfg.Models, "auxue.onnx"), cfg.Library, depth.Width, depth.Height, fc, fh, fw)
	if err != nil {
		return res, err
	}
	defer aux.Close()

	var (
		dq              metrics.DepthMean
		sp              = metrics.Sparsifier{Step: cfg.SparsStep}
		rmseM, absM     metrics.SparsMean
		sky, indoor     metrics.BinaryScores
		skyImg          metrics.BinaryScores
		aucImg, apImg   float64
		nImg            int
		uce             metrics.UCE
		skyAll          float64
		skyImgs         int
		hw              = depth.Width * depth.Height
		skyMask, gtMask = make([]bool, hw), make([]bool, hw)
		allErr, allB    []float32
	)
	for _, it := range list {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		s, err := ds.Load(it)
		if err != nil {
			return res, err
		}
		_, d, feats, err := depth.Predict(ctx, s.RGB, s.Width, s.Height)
		if err != nil {
			return res, fmt.Errorf("%s: %w", s.Name, err)
		}
		scale, epis, err := aux.Predict(feats)
		if err != nil {
			return res, fmt.Errorf("%s: %w", s.Name, err)
		}
		q, err := metrics.Depth(d, s.Sparse, metrics.KITTIRange)
		if err != nil {
			return res, err
		}
		dq.Add(q)
		r, err := sp.Evaluate(d, s.Sparse, scale, metrics.SparsRMSE)
		if err != nil {
			return res, err
		}
		rmseM.Add(r)
		if r, err = sp.Evaluate(d, s.Sparse, scale, metrics.SparsAbsRel); err != nil {
			return res, err
		}
		absM.Add(r)
		for i := range gtMask {
			gtMask[i] = s.Sparse[i] > 0
			skyMask[i] = s.Semantic != nil && s.Semantic[i] == metrics.SkyClass
			if gtMask[i] {
				allErr = append(allErr, float32(math.Abs(float64(d[i]-s.Sparse[i]))))
				allB = append(allB, scale[i])
			}
		}
		if _, err := sky.AddMasked(epis, skyMask, true); err != nil {
			return res, err
		}
		if _, err := sky.AddMasked(epis, gtMask, false); err != nil {
			return res, err
		}
		if _, err := indoor.AddMasked(epis, gtMask, false); err != nil {
			return res, err
		}
		skyImg.Reset()
		if _, err := skyImg.AddMasked(epis, skyMask, true); err != nil {
			return res, err
		}
		if _, err := skyImg.AddMasked(epis, gtMask, false); err != nil {
			return res, err
		}
		if p, n := skyImg.Counts(); p > 0 && n > 0 {
			a, err := skyImg.AUC()
			if err != nil {
				return res, err
			}
			ap, err := skyImg.AUPR()
			if err != nil {
				return res, err
			}
			aucImg, apImg, nImg = aucImg+a, apImg+ap, nImg+1
		}
		if s.Semantic != nil {
			v, ok, err := metrics.SkyAll(epis, s.Semantic, metrics.SkyClass)
			if err != nil {
				return res, err
			}
			if ok {
				skyAll += v
				skyImgs++
			}
		}
		res.Frames++
	}
	res.SkyAUCPerImage, res.SkyAUPRPerImage = math.NaN(), math.NaN()
	if nImg > 0 {
		res.SkyAUCPerImage, res.SkyAUPRPerImage = aucImg/float64(nImg), apImg/float64(nImg)
	}
	m := dq.Mean()
	res.AbsRel, res.RMSE, res.Delta1 = m.AbsRel, m.RMSE, m.Delta1
	res.AUSERMSE, res.AURGRMSE, _ = rmseM.Mean()
	res.AUSEAbsRel, res.AURGAbsRel, _ = absM.Mean()
	res.SkyAll = math.NaN()
	if skyImgs > 0 {
		res.SkyAll = skyAll / float64(skyImgs)
	}
	if res.UCE, err = uce.Evaluate(allErr, allB, nil); err != nil {
		return res, err
	}
	if res.SkyAUC, err = sky.AUC(); err != nil {
		return res, fmt.Errorf("sky AUC: %w", err)
	}
	if res.SkyAUPR, err = sky.AUPR(); err != nil {
		return res, fmt.Errorf("sky AUPR: %w", err)
	}
	if cfg.Indoor == "" {
		return res, nil
	}
	ind, err := dataset.OpenSim(cfg.Indoor)
	if err != nil {
		return res, err
	}
	ilist, err := items(ind, "all")
	if err != nil {
		return res, err
	}
	if cfg.MaxIndoor > 0 && len(ilist) > cfg.MaxIndoor {
		ilist = ilist[:cfg.MaxIndoor]
	}
	for _, it := range ilist {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		s, err := ind.Load(it)
		if err != nil {
			return res, err
		}
		_, _, feats, err := depth.Predict(ctx, s.RGB, s.Width, s.Height)
		if err != nil {
			return res, fmt.Errorf("%s: %w", s.Name, err)
		}
		_, epis, err := aux.Predict(feats)
		if err != nil {
			return res, fmt.Errorf("%s: %w", s.Name, err)
		}
		for i := range gtMask {
			gtMask[i] = s.Sparse[i] > 0
		}
		if _, err := indoor.AddMasked(epis, gtMask, true); err != nil {
			return res, err
		}
		res.Indoor++
	}
	if res.IndoorAUC, err = indoor.AUC(); err != nil {
		return res, fmt.Errorf("indoor AUC: %w", err)
	}
	return res, nil
}
