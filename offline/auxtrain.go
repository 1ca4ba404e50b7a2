package offline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/runtime/infer"
)

// Which heads read the depth model's feature tensor (AuxTrainConfig.FeatureHeads).
const (
	FeatureHeadsBoth = "both"
	FeatureHeadsDIDO = "dido"
)

// AuxTrain freezes the depth model, runs it through ONNX Runtime on the
// training frames (cached on disk), and trains the generalized AuxUE on
// its errors against the sparse ground truth (per-image discretization
// over the labeled blocks, K bins), validating after every epoch.
func AuxTrain(ctx context.Context, cfg AuxTrainConfig) (*auxue.Model, AuxStats, error) {
	cfg.defaults()
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st := AuxStats{Seed: cfg.Seed, Checkpoint: cfg.Checkpoint, DepthModel: cfg.DepthModel}
	switch {
	case cfg.Outliers < 0 || cfg.Outliers >= 1 || (cfg.Outliers > 0 && len(cfg.OutlierKinds) == 0):
		return nil, st, fmt.Errorf("train auxue: outlier fraction %v with kinds %v, want [0, 1) and a kind", cfg.Outliers, cfg.OutlierKinds)
	case cfg.Factor < 1 || cfg.Factor > 64:
		return nil, st, fmt.Errorf("train auxue: factor %d, want 1 to 64", cfg.Factor)
	case cfg.Batch < 1 || cfg.Epochs < 0 || (cfg.Epochs == 0 && cfg.Steps < 1):
		return nil, st, fmt.Errorf("train auxue: batch %d, epochs %d and steps %d: want a positive batch, and epochs or steps", cfg.Batch, cfg.Epochs, cfg.Steps)
	case cfg.IgnoreGroundTruth && !cfg.Teacher.Enabled():
		return nil, st, errors.New("train auxue: ignoring the ground truth needs a teacher")
	}
	if err := cfg.Teacher.check(); err != nil {
		return nil, st, fmt.Errorf("train auxue: %w", err)
	}
	spec, err := ReadSpec(cfg.DepthSpec, infer.KindDepth)
	if err != nil {
		return nil, st, err
	}
	bands := 0
	if cfg.GlobalContext {
		bands = cfg.GlobalContextBands
	}
	contract, err := AuxContract(spec, cfg.Factor, bands, cfg.MaxDepth, !cfg.NoRow)
	if err != nil {
		return nil, st, fmt.Errorf("train auxue: depth spec %q: %w", cfg.DepthSpec, err)
	}
	t0 := time.Now()
	var tensors []string
	projSeed := uint64(cfg.Seed)
	fc, ok, err := resolveFeatures(cfg.AuxDepthModel, cfg.AuxInputs, spec)
	probeFailed := err != nil
	if sm := (*infer.SpecMismatchError)(nil); errors.As(err, &sm) {
		// Opening the depth model below reports the spec's mismatch with
		// both sides, as every command does.
		err = nil
	}
	if err != nil && cfg.ModelFeatures == FeaturesAuto {
		// auto reads a tensor where the model has one that the probe can
		// show (a float16 graph's tensors, for one, cannot be exposed as
		// float); otherwise it trains on the image and the depth.
		log.Warn("train auxue: no feature tensor of the depth model; the AuxUE reads its image and depth only", "err", err)
		ok, err = false, nil
	}
	if err != nil {
		return nil, st, fmt.Errorf("train auxue: %w", err)
	} else if ok {
		if contract.Model, err = auxue.NewModelFeatures(fc.Tensor, fc.Channels, fc.Height, fc.Width, cfg.ModelFeatureChannels, projSeed); err != nil {
			return nil, st, fmt.Errorf("train auxue: %w", err)
		}
		st.Features = featureSummary(fc, contract.Model)
		tensors = []string{fc.Tensor}
		log.Info("train auxue: the AuxUE reads a tensor of the depth model", "tensor", fc.Tensor,
			"shape", fmt.Sprintf("(1,%d,%d,%d)", fc.Channels, fc.Height, fc.Width), "resolution", fmt.Sprintf("1/%.2f", fc.Ratio),
			"channels", contract.Model.Out, "auto", fc.Auto, "candidates", fc.Candidates, "eligible", fc.Eligible)
	} else if cfg.ModelFeatures == FeaturesAuto && !probeFailed {
		log.Info("train auxue: the depth model has no feature tensor at 1/4 to 1/8 of its input; the AuxUE reads its image and depth only",
			"candidates", fc.Candidates)
	}
	st.Contract, st.Relative = TrainedContract{contract}, spec.Relative()
	models, err := infer.OpenModels(ctx, infer.ModelsConfig{Depth: cfg.DepthModel, DepthSpec: spec, Inference: cfg.Inference, DepthSpecFile: cfg.DepthSpec,
		DepthTensors: tensors}, log)
	if err != nil {
		return nil, st, fmt.Errorf("train auxue: %w", err)
	}
	defer models.Close()
	st.Phases.Open = since(t0)
	st.DepthSHA256, st.Provider = models.DepthSession().SHA256(), models.DepthSession().Provider()

	if strings.HasSuffix(cfg.Data, ".mcap") && cfg.DataFS == nil {
		// A recording: its frames exported once into the cache, every
		// one in the train split (a recording has no validation split).
		dir, cleanup, err := exportRecording(ctx, cfg.Data, cfg.CacheDir, log)
		if err != nil {
			return nil, st, fmt.Errorf("train auxue: --data %s: %w", cfg.Data, err)
		}
		defer cleanup()
		cfg.Data, cfg.Split = dir, "train"
		if cfg.ValSplit == "val" {
			cfg.ValSplit = "none"
		}
	}
	var tch *teacher
	if cfg.Teacher.Enabled() {
		if tch, err = openTeacher(ctx, cfg.Teacher, cfg.Inference, st.Relative, cfg.MaxDepth, log); err != nil {
			return nil, st, fmt.Errorf("train auxue: %w", err)
		}
		defer tch.Close()
		tch.rep.IgnoredGT = cfg.IgnoreGroundTruth
		st.Teacher = tch.rep
		log.Info("train auxue: a teacher labels the frames", "teacher", cfg.Teacher.Model, "sha256", tch.sha,
			"relative", tch.relative, "max_depth", tch.cfg.MaxDepth, "mask", cfg.Teacher.Mask, "ignore_ground_truth", cfg.IgnoreGroundTruth)
	}

	train, val, err := auxSources(cfg.AuxData, cfg.Seed, cfg.Teacher.Enabled())
	if err != nil {
		return nil, st, fmt.Errorf("train auxue: %w", err)
	}
	gh, gw := contract.Grid()
	layout := recordLayout{C: contract.Channels(), G: gh * gw, Labels: tch != nil}
	keyContract := contract
	if mf := contract.Model; mf != nil {
		// The projection is a function of its seed: key by the seed, not
		// by the matrix.
		k := *mf
		k.Projection = nil
		keyContract.Model = &k
	}
	key := func(role string, src frameSource) any {
		k := map[string]any{"version": 1, "role": role, "depth_sha256": st.DepthSHA256, "spec": spec, "contract": keyContract,
			"max_depth": cfg.MaxDepth, "frames": src.Identity()}
		if contract.Model != nil && contract.Model.Projection != nil {
			k["projection_seed"] = projSeed
		}
		if tch != nil {
			k["teacher"] = tch.keyPart()
			k["ignore_ground_truth"] = cfg.IgnoreGroundTruth
		}
		return k
	}
	labeller := func(role string, src frameSource) (*teacherRun, error) {
		if tch == nil {
			return nil, nil
		}
		c, err := openTeacherCache(cfg.CacheDir, map[string]any{"version": 1, "role": role, "teacher_sha256": tch.sha, "spec": tch.spec,
			"teacher_auxue_sha256": tch.auxSHA, "frames": src.Identity()})
		if err != nil {
			return nil, err
		}
		if tch.rep.CacheDir == "" {
			tch.rep.CacheDir = filepath.Dir(c.dir)
		}
		tr := &teacherRun{t: tch, cache: c, ignoreGT: cfg.IgnoreGroundTruth, contract: contract}
		if err := tr.prefill(ctx, src); err != nil {
			c.Close()
			return nil, err
		}
		return tr, nil
	}
	fill := cacheFill{dir: cfg.CacheDir, models: models, prep: &preparer{contract: contract, relative: st.Relative, maxDepth: cfg.MaxDepth},
		layout: layout, grid: [2]int{gh, gw}, phases: &st.Phases, progress: cfg.Progress, log: log}
	cacheStart := time.Now()
	ttr, err := labeller("train", train)
	if err != nil {
		return nil, st, fmt.Errorf("train auxue: %w", err)
	}
	tc, err := fill.fill(ctx, ttr, train, key("train", train), "caching training frames")
	ttr.Close()
	if err != nil {
		return nil, st, err
	}
	defer tc.Close()
	st.Cache.Dir, st.Cache.Frames, st.Cache.Reused = tc.dir, tc.n, tc.reused
	var vc *cachedFrames
	if val != nil {
		vtr, err := labeller("val", val)
		if err != nil {
			return nil, st, fmt.Errorf("train auxue: %w", err)
		}
		vc, err = fill.fill(ctx, vtr, val, key("val", val), "caching validation frames")
		vtr.Close()
		if err != nil {
			return nil, st, err
		}
		defer vc.Close()
		st.ValFrames, st.Cache.ValFrames, st.Cache.ValReused = vc.n, vc.n, vc.reused
	}
	cacheTime := time.Since(cacheStart)
	if fresh := st.Cache.Frames - st.Cache.Reused + st.Cache.ValFrames - st.Cache.ValReused; fresh > 0 {
		st.Throughput.Cache = Float(float64(fresh) / (st.Phases.Load + st.Phases.Depth + st.Phases.Prepare + st.Phases.CacheWrite).Float64())
	}
	st.Cache.Bytes = tc.size()
	if vc != nil {
		st.Cache.Bytes += vc.size()
	}
	st.Cache.BytesPer100 = 100 * float64(layout.bytes())
	st.Frames = tc.n
	var absSum float64
	var absN int
	rec := layout.newRecord()
	for i := 0; i < tc.n; i++ {
		if err := tc.read(i, rec); err != nil {
			return nil, st, err
		}
		if !math.IsNaN(rec.absRel) {
			absSum += rec.absRel
			absN++
		}
		if tch != nil {
			tch.rep.Train.add(decodeLabels(rec.labels))
		}
	}
	if tch != nil && vc != nil {
		for i := 0; i < vc.n; i++ {
			if err := vc.read(i, rec); err != nil {
				return nil, st, err
			}
			tch.rep.Val.add(decodeLabels(rec.labels))
		}
	}
	if tch != nil {
		l := tch.rep.Train
		log.Info("train auxue: targets of the training frames", "real_pixels", l.Real, "teacher_pixels", l.Teacher,
			"beyond_range", l.BeyondRange, "masked", l.Masked, "low_confidence", l.LowConfidence, "frames_with_ground_truth", l.FramesWithGT,
			"teacher_frames_run", tch.rep.FramesRun, "teacher_frames_reused", tch.rep.FramesReused)
	}
	st.MeanTrainAbsRel = Float(math.NaN())
	if absN > 0 {
		st.MeanTrainAbsRel = Float(absSum / float64(absN))
	}
	log.Info("train auxue: frames cached", "train", tc.n, "val", st.ValFrames, "cache", tc.dir,
		"bytes", st.Cache.Bytes, "depth_absrel", float64(st.MeanTrainAbsRel), "wall", cacheTime.Round(time.Millisecond))
	if mf := contract.Model; mf != nil {
		// Normalize the model's channels by their statistics on the
		// training frames (the export bakes them in as constants).
		if err := featureStats(tc, layout, contract.BaseChannels(), mf); err != nil {
			return nil, st, err
		}
	}
	if cfg.Epochs == 0 {
		cfg.Epochs, st.EpochsAuto = AutoEpochs(tc.n, cfg.Batch, cfg.Steps), true
		log.Info("train auxue: epochs from the frames", "frames", tc.n, "batch", cfg.Batch, "target_steps", cfg.Steps, "epochs", cfg.Epochs)
	}
	st.EpochsRun = cfg.Epochs

	mc := cfg.AuxModelConfig(contract.Channels())
	if cfg.FeatureHeads == FeatureHeadsDIDO && contract.Model != nil {
		mc.AleatoricInputs = contract.BaseChannels()
	}
	model, err := auxue.NewModel(mc)
	if err != nil {
		return nil, st, err
	}
	data := trainData{train: tc, val: vc, layout: layout, grid: [2]int{gh, gw}}
	if err := trainLoop(ctx, cfg.AuxOptim, cfg.Seed, cfg.K, model, data, &st, cfg.Progress, log); err != nil {
		return nil, st, err
	}
	return model, st, nil
}

// Bounds of AutoEpochs.
const (
	MinAutoEpochs = 1
	MaxAutoEpochs = 100
)
