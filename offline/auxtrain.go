package offline

import (
	"context"
	"errors"
	"fmt"
	"github.com/didoedge/didoedge/runtime/domain"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/offline/depthtrain"
	"github.com/didoedge/didoedge/pkg/nn"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// AuxTrainConfig configures AuxTrain. Zero fields take the defaults in brackets.
type AuxTrainConfig struct {
	// DepthModel and DepthSpec are the frozen main model and its IO spec
	// (runtime/infer.IOSpec); Inference selects the ONNX Runtime library
	// and the execution providers (CPU by default; CUDA or TensorRT
	// where present).
	DepthModel, DepthSpec string
	Inference             onnxrt.Config

	// Data is a data set (dataset.Open: the sim render layout, real KITTI
	// with split files, NYU); "" draws frames from the simulated pool
	// rendered on the fly (the reference models).
	Data, Layout, KITTIDepth string
	// DataFS and KITTIDepthFS, when set, read Data and KITTIDepth (an S3
	// prefix; Data is then only its name). Each frame is read once, into
	// the cache that the epochs read.
	DataFS, KITTIDepthFS fs.FS
	// Split and ValSplit name the training and validation splits (names
	// or split files) [train, val]; ValSplit "none" skips validation.
	Split, ValSplit string

	// MaxDepth bounds and scales the depth channel of a metric model
	// [80] and bounds an aligned relative depth.
	MaxDepth float64
	// Seed, Drives and FramesPerDrive select the simulated pool's frames
	// as for the depth network (the AuxUE learns on the main model's
	// training distribution, as in the paper) [1, 48, 200]; Width and
	// Height are the rendered size [640 x 192].
	Seed                   int64
	Drives, FramesPerDrive int
	Width, Height          int
	// Frames is how many frames are drawn from the pool [300], or the
	// most frames of the training split (evenly spread; 0 = all).
	Frames int
	// ValFrames bounds the validation frames [16; pool: from ValDrives
	// drives after the training drives, 2].
	ValFrames, ValDrives int

	// Factor is the AuxUE's block size in input pixels [4]; Row adds the
	// row coordinate to its input [true, unless NoRow].
	Factor int
	NoRow  bool

	// Epochs over the cached frames and the Batch size [15, 2]. With
	// Epochs 0 and Steps > 0 the epochs follow the frames: AutoEpochs.
	Epochs, Batch int
	// Steps is the number of optimizer steps that Epochs 0 aims at
	// (AutoEpochs); 0 keeps the default of 15 epochs.
	Steps int
	// LR decays polynomially (power 0.9) to EndLR [2e-3 -> 1e-5].
	LR, EndLR float64
	// EncoderWidth and Hidden of the AuxUE [8, 8]; K and Lambda of DIDO [32, 0.01].
	EncoderWidth, Hidden, K int
	Lambda                  float64
	// UnlabeledKL keeps gamma * Lambda * KL(Dir(alpha) || Dir(1)) on the
	// blocks without ground truth (auxue.Config.UnlabeledKL).
	UnlabeledKL float64
	// GlobalContext joins each pixel's DIDO features with the frame's
	// channel means over GlobalContextBands horizontal bands.
	GlobalContext      bool
	GlobalContextBands int
	// Outliers is the fraction of batch items replaced by a layout outlier
	// of one of OutlierKinds (auxue.MaybeOutlier). 0 disables.
	Outliers     float64
	OutlierKinds []auxue.OutlierKind

	// ModelFeatures makes the AuxUE also read one of the depth model's own
	// tensors (auxue.ModelFeatures): FeaturesAuto picks it
	// (ChooseFeatureTensor; a model without one trains without), a
	// tensor name takes that tensor, "" or FeaturesOff none.
	ModelFeatures string
	// ModelFeatureChannels is the most channels made of that tensor (a
	// random projection when it has more) [auxue.DefaultModelFeatureChannels].
	ModelFeatureChannels int
	// DomainFrames: held-out training-domain frames the training-domain
	// record (runtime/domain) is fitted on after the export: the pool's
	// drives after the validation drives, or at most this many of
	// ValSplit [DefaultDomainFrames; negative: no record]. DomainStatistic
	// is the record's statistic [domain.KNN].
	DomainFrames    int
	DomainStatistic string

	// CacheDir keeps the depth model's cached outputs and errors between
	// runs, keyed by the model's sha256, its spec, the data and the
	// contract ("" = a temporary cache).
	CacheDir string
	// Checkpoint is written after every epoch (weights, Adam's moments,
	// the epoch); with Resume an existing one is continued from.
	Checkpoint string
	Resume     bool

	// Progress receives a progress bar with the rate and ETA (nil: none);
	// Log receives one line per epoch.
	Progress io.Writer
	Log      *slog.Logger
}

func (c *AuxTrainConfig) defaults() {
	depthtrain.PoolDefaults(&c.Drives, &c.FramesPerDrive, &c.Width, &c.Height)
	if c.Data == "" {
		setDefault(&c.Frames, 300)
		setDefault(&c.ValFrames, 16)
	}
	setDefault(&c.ValDrives, 2)
	setDefault(&c.DomainFrames, DefaultDomainFrames)
	setDefault(&c.DomainStatistic, domain.KNN)
	setDefault(&c.Split, "train")
	setDefault(&c.ValSplit, "val")
	if c.Steps <= 0 {
		setDefault(&c.Epochs, 15)
	}
	setDefault(&c.Batch, 2)
	setDefault(&c.EncoderWidth, 8)
	setDefault(&c.Hidden, 8)
	setDefault(&c.K, auxue.DefaultKDepth)
	setDefault(&c.MaxDepth, 80)
	setDefault(&c.Seed, 1)
	setDefault(&c.LR, 2e-3)
	setDefault(&c.EndLR, 1e-5)
	setDefault(&c.Lambda, auxue.DefaultLambdaDepth)
	setDefault(&c.Factor, 4)
}

// DefaultAuxTrainConfig is the recipe `didoedge train auxue` runs when no
// flag says otherwise (its flags' defaults), the best one measured on the
// byo walkthrough's data (docs/training.md, "The default recipe"): the
// 4-band global context, the unlabeled-block KL at gamma 0.1, a quarter
// of layout outliers, lr 6e-3, the epochs from the frames (AutoEpochs with
// DefaultAuxSteps), and the depth model's own feature tensor when it has
// one (ModelFeatures auto). The zero AuxTrainConfig of Go callers keeps its
// own meaning (no context, no outliers, 15 epochs, no model tensor).
func DefaultAuxTrainConfig() AuxTrainConfig {
	c := AuxTrainConfig{Epochs: 0, Steps: DefaultAuxSteps, LR: 6e-3, UnlabeledKL: 0.1, GlobalContext: true, GlobalContextBands: 4,
		Outliers: 0.25, OutlierKinds: []auxue.OutlierKind{auxue.OutlierFlip, auxue.OutlierTiles}, ModelFeatures: FeaturesAuto,
		ModelFeatureChannels: auxue.DefaultModelFeatureChannels}
	c.defaults()
	return c
}

// DefaultAuxSteps is the optimizer steps that the default recipe's epochs
// aim at (AutoEpochs).
const DefaultAuxSteps = 2000

// CheckRecipe checks the recipe's values that AuxTrain would otherwise
// only meet after the depth model and the frames are loaded.
func (c AuxTrainConfig) CheckRecipe() error {
	switch {
	case c.Epochs < 0:
		return fmt.Errorf("--epochs %d: want 0 (from the frames, --steps) or more", c.Epochs)
	case c.Epochs == 0 && c.Steps < 1:
		return fmt.Errorf("--epochs 0 takes the epochs from the frames and --steps, but --steps is %d", c.Steps)
	case c.Batch < 1:
		return fmt.Errorf("--batch %d: want 1 or more", c.Batch)
	case !(c.LR > 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("--lr %g: want a positive learning rate", c.LR)
	case c.Outliers < 0 || c.Outliers >= 1 || (c.Outliers > 0 && len(c.OutlierKinds) == 0):
		return fmt.Errorf("--outliers %g with --outlier-kinds %v: want a fraction in [0, 1) and a kind", c.Outliers, c.OutlierKinds)
	case c.GlobalContextBands < 0:
		return fmt.Errorf("--global-context-bands %d: want 0 or more", c.GlobalContextBands)
	case c.ModelFeatures == "":
		return fmt.Errorf("--model-features: empty; want auto, off or a tensor name of the depth model")
	case c.ModelFeatureChannels < 0 || (c.ModelFeatureChannels == 0 && c.ModelFeatures != FeaturesOff):
		return fmt.Errorf("--model-feature-channels %d: want 1 or more", c.ModelFeatureChannels)
	}
	return nil
}

// AuxModelConfig is the generalized AuxUE of the depth task: dense, input
// the contract's features (in channels), separate encoders, Laplace
// sigma_Theta1, DIDO sigma_Theta2.
func (c AuxTrainConfig) AuxModelConfig(in int) auxue.Config {
	c.defaults()
	return auxue.Config{Form: auxue.FormDense, In: in, EncoderWidth: c.EncoderWidth,
		SharedEncoder: false, Hidden: c.Hidden, Aleatoric: auxue.AleatoricLoss{Kind: auxue.Laplace},
		K: c.K, Lambda: c.Lambda, UnlabeledKL: c.UnlabeledKL, GlobalContext: c.GlobalContext, GlobalContextBands: c.GlobalContextBands, Seed: uint64(c.Seed)}
}

// AuxStats summarizes an AuxUE run.
type AuxStats struct {
	Frames, ValFrames, Steps int
	Contract                 auxue.InputContract
	Relative                 bool
	FirstLoss, LastLoss      float64 // mean total loss of the first and last epoch run
	FirstAlea, LastAlea      float64
	FirstEpis, LastEpis      float64
	MeanTrainAbsRel          float64 // the frozen depth model's AbsRel on the training frames (aligned for a relative model)
	ResumedFrom              int     // epochs already done by the checkpoint (0: a fresh run)
	EpochsRun                int     // the epochs of the run (AutoEpochs when the config left them to the frames)
	EpochsAuto               bool
	// Features is the depth model's tensor the AuxUE reads (nil: none).
	Features           *FeatureChoice
	Epochs             []EpochReport
	Cache              CacheReport
	Phases             PhaseTimes
	DepthSHA256        string
	Provider           string
	CacheFPS, TrainFPS float64 // frames per second: through the depth model into the cache; frame-steps of training
}

// EpochReport is one epoch's losses and validation figures (NaN where
// not computed). Validation runs the Go AuxUE on the validation frames'
// cached features, at the AuxUE's grid.
type EpochReport struct {
	Epoch              int     `json:"epoch"`
	Laplace            float64 `json:"laplace"`
	DIDO               float64 `json:"dido"`
	AUSERMSE, AURGRMSE float64 `json:"-"`
	SkyAUC, NoGTAUC    float64 `json:"-"`
	// KS holds the 0.5, 0.9 and 0.99 quantiles of K/S over every block of
	// the validation frames (NaN without validation frames).
	KS      [3]float64 `json:"-"`
	Seconds float64    `json:"seconds"`
}

// CacheReport describes the on-disk cache.
type CacheReport struct {
	Dir              string
	Bytes            int64
	Frames, Reused   int // records, and how many came from an earlier run
	BytesPer100      float64
	ValFrames, ValRe int
}

// PhaseTimes splits a run's wall time.
type PhaseTimes struct {
	Open       time.Duration // loading the depth model into ONNX Runtime
	Load       time.Duration // reading or rendering frames
	Depth      time.Duration // the depth model in ONNX Runtime
	Prepare    time.Duration // features, alignment, block errors
	CacheWrite time.Duration
	Batch      time.Duration // reading the cache, layout outliers, discretization
	Step       time.Duration // AuxUE forward, losses, backward
	Optimizer  time.Duration
	Validate   time.Duration
	Checkpoint time.Duration
}

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
	var st AuxStats
	switch {
	case cfg.Outliers < 0 || cfg.Outliers >= 1 || (cfg.Outliers > 0 && len(cfg.OutlierKinds) == 0):
		return nil, st, fmt.Errorf("train auxue: outlier fraction %v with kinds %v, want [0, 1) and a kind", cfg.Outliers, cfg.OutlierKinds)
	case cfg.Factor < 1 || cfg.Factor > 64:
		return nil, st, fmt.Errorf("train auxue: factor %d, want 1 to 64", cfg.Factor)
	case cfg.Batch < 1 || cfg.Epochs < 0 || (cfg.Epochs == 0 && cfg.Steps < 1):
		return nil, st, fmt.Errorf("train auxue: batch %d, epochs %d and steps %d: want a positive batch, and epochs or steps", cfg.Batch, cfg.Epochs, cfg.Steps)
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
	fc, ok, err := resolveFeatures(cfg, spec)
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
		st.Features = &fc
		tensors = []string{fc.Tensor}
		log.Info("train auxue: the AuxUE reads a tensor of the depth model", "tensor", fc.Tensor,
			"shape", fmt.Sprintf("(1,%d,%d,%d)", fc.Channels, fc.Height, fc.Width), "resolution", fmt.Sprintf("1/%.2f", fc.Ratio),
			"channels", contract.Model.Out, "auto", fc.Auto, "candidates", fc.Candidates, "eligible", fc.Eligible)
	} else if cfg.ModelFeatures == FeaturesAuto && !probeFailed {
		log.Info("train auxue: the depth model has no feature tensor at 1/4 to 1/8 of its input; the AuxUE reads its image and depth only",
			"candidates", fc.Candidates)
	}
	st.Contract, st.Relative = contract, spec.Relative()
	models, err := infer.OpenModels(ctx, infer.ModelsConfig{Depth: cfg.DepthModel, DepthSpec: spec, Inference: cfg.Inference, DepthSpecFile: cfg.DepthSpec,
		DepthTensors: tensors}, log)
	if err != nil {
		return nil, st, fmt.Errorf("train auxue: %w", err)
	}
	defer models.Close()
	st.Phases.Open = time.Since(t0)
	st.DepthSHA256, st.Provider = models.DepthSession().SHA256(), models.DepthSession().Provider()

	train, val, err := auxSources(cfg)
	if err != nil {
		return nil, st, fmt.Errorf("train auxue: %w", err)
	}
	gh, gw := contract.Grid()
	layout := recordLayout{C: contract.Channels(), G: gh * gw}
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
		return k
	}
	prep := &preparer{contract: contract, relative: st.Relative, maxDepth: cfg.MaxDepth}
	cacheStart := time.Now()
	tc, err := fillCache(ctx, cfg, models, prep, train, key("train", train), layout, [2]int{gh, gw}, &st.Phases, log, "caching training frames")
	if err != nil {
		return nil, st, err
	}
	defer tc.Close()
	st.Cache.Dir, st.Cache.Frames, st.Cache.Reused = tc.dir, tc.n, tc.reused
	var vc *cachedFrames
	if val != nil {
		if vc, err = fillCache(ctx, cfg, models, prep, val, key("val", val), layout, [2]int{gh, gw}, &st.Phases, log, "caching validation frames"); err != nil {
			return nil, st, err
		}
		defer vc.Close()
		st.ValFrames, st.Cache.ValFrames, st.Cache.ValRe = vc.n, vc.n, vc.reused
	}
	cacheTime := time.Since(cacheStart)
	if fresh := st.Cache.Frames - st.Cache.Reused + st.Cache.ValFrames - st.Cache.ValRe; fresh > 0 {
		st.CacheFPS = float64(fresh) / (st.Phases.Load + st.Phases.Depth + st.Phases.Prepare + st.Phases.CacheWrite).Seconds()
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
	}
	st.MeanTrainAbsRel = math.NaN()
	if absN > 0 {
		st.MeanTrainAbsRel = absSum / float64(absN)
	}
	log.Info("train auxue: frames cached", "train", tc.n, "val", st.ValFrames, "cache", tc.dir,
		"bytes", st.Cache.Bytes, "depth_absrel", st.MeanTrainAbsRel, "wall", cacheTime.Round(time.Millisecond))
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

	model, err := auxue.NewModel(cfg.AuxModelConfig(contract.Channels()))
	if err != nil {
		return nil, st, err
	}
	if err := trainLoop(ctx, cfg, model, tc, vc, layout, [2]int{gh, gw}, &st, log); err != nil {
		return nil, st, err
	}
	return model, st, nil
}

// cachedFrames is a frame cache and how much of it an earlier run made.
type cachedFrames struct {
	*frameCache
	reused int
}

// fillCache opens the cache for src and runs the depth model on the frames
// it does not hold yet.
func fillCache(ctx context.Context, cfg AuxTrainConfig, models *infer.Models, prep *preparer, src frameSource,
	key any, layout recordLayout, grid [2]int, ph *PhaseTimes, log *slog.Logger, what string) (*cachedFrames, error) {
	c, err := openCache(cfg.CacheDir, key, layout, grid)
	if err != nil {
		return nil, err
	}
	cf := &cachedFrames{frameCache: c, reused: min(c.n, src.Len())}
	if c.n > src.Len() {
		c.Close()
		return nil, fmt.Errorf("cache %q holds %d frames, the data %d", c.dir, c.n, src.Len())
	}
	if c.n > 0 {
		log.Info("train auxue: reusing cached frames", "cache", c.dir, "frames", c.n, "of", src.Len())
	}
	bar := newProgress(cfg.Progress, what, "frames", src.Len())
	rec := layout.newRecord()
	for i := c.n; i < src.Len(); i++ {
		if err := ctx.Err(); err != nil {
			c.Close()
			return nil, err
		}
		t0 := time.Now()
		s, err := src.Frame(i)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("train auxue: %w", err)
		}
		t1 := time.Now()
		models.FrameFocal(s.Intrinsics.Fx, s.Width)
		dp, err := models.RunDepth(ctx, s.RGB, s.Width, s.Height)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("train auxue: frame %s: %w", s.Name, err)
		}
		t2 := time.Now()
		if err := prep.prepare(s, dp, rec); err != nil {
			c.Close()
			return nil, fmt.Errorf("train auxue: %w", err)
		}
		t3 := time.Now()
		if err := c.append(rec); err != nil {
			c.Close()
			return nil, err
		}
		ph.Load += t1.Sub(t0)
		ph.Depth += t2.Sub(t1)
		ph.Prepare += t3.Sub(t2)
		ph.CacheWrite += time.Since(t3)
		bar.set(i+1, "")
	}
	bar.finish("")
	return cf, nil
}

// auxSources builds the training and validation frames.
func auxSources(cfg AuxTrainConfig) (train, val frameSource, err error) {
	if cfg.Data == "" {
		tr, err := newSimPool(cfg.Seed, cfg.Drives, cfg.FramesPerDrive, cfg.Width, cfg.Height, cfg.Frames, 0, 0x6361636865)
		if err != nil {
			return nil, nil, err
		}
		if cfg.ValSplit == "none" || cfg.ValFrames == 0 {
			return tr, nil, nil
		}
		// Validation drives follow the training drives (never trained on).
		va, err := newSimPool(cfg.Seed, cfg.ValDrives, cfg.FramesPerDrive, cfg.Width, cfg.Height, cfg.ValFrames, cfg.Drives, 0x76616c)
		if err != nil {
			return nil, nil, err
		}
		return tr, va, nil
	}
	src := dataset.Source{Dir: cfg.Data, FS: cfg.DataFS, Layout: cfg.Layout, KITTIDepth: cfg.KITTIDepth, KITTIDepthFS: cfg.KITTIDepthFS}
	tr, err := openDataFrames(src, cfg.Split, cfg.Frames)
	if err != nil {
		return nil, nil, err
	}
	if cfg.ValSplit == "none" {
		return tr, nil, nil
	}
	va, err := openDataFrames(src, cfg.ValSplit, max(cfg.ValFrames, 0))
	if err != nil {
		return nil, nil, fmt.Errorf("validation split (--val-split none skips it): %w", err)
	}
	return tr, va, nil
}

// trainLoop runs the epochs, validating and checkpointing after each.
// The shuffles and the outliers come from two PCGs seeded once by the seed;
// a run resumed from a checkpoint replays their draws for the epochs done
// (without training), so it continues exactly as an uninterrupted one.
func trainLoop(ctx context.Context, cfg AuxTrainConfig, model *auxue.Model, tc, vc *cachedFrames, layout recordLayout,
	grid [2]int, st *AuxStats, log *slog.Logger) error {
	named := model.Params()
	params := make([]*nn.Param, len(named))
	for i, p := range named {
		q := *p.Param
		q.Name = p.Name
		params[i] = &q
	}
	opt := nn.NewAdam(params, nn.AdamConfig{})
	B, C := cfg.Batch, layout.C
	gh, gw := grid[0], grid[1]
	g := gh * gw
	perEpoch := tc.n / B
	if perEpoch == 0 {
		return fmt.Errorf("train auxue: %d cached frames for a batch of %d", tc.n, B)
	}
	st.Steps = perEpoch * cfg.Epochs
	start := 0
	if cfg.Resume && cfg.Checkpoint != "" {
		if _, err := os.Stat(cfg.Checkpoint); err == nil {
			meta, err := nn.LoadCheckpointFile(cfg.Checkpoint, append(append([]*nn.Param{}, params...), opt.StateParams()...))
			if err != nil {
				return fmt.Errorf("train auxue: resume: %w", err)
			}
			if start, err = strconv.Atoi(meta["epoch"]); err != nil || start < 0 || start > cfg.Epochs {
				return fmt.Errorf("train auxue: resume: checkpoint %q: epoch %q, want 0 to %d", cfg.Checkpoint, meta["epoch"], cfg.Epochs)
			}
			if meta["steps_per_epoch"] != strconv.Itoa(perEpoch) || meta["seed"] != strconv.FormatInt(cfg.Seed, 10) || meta["epochs"] != strconv.Itoa(cfg.Epochs) {
				return fmt.Errorf("train auxue: resume: checkpoint %q was written by a run of %s epochs of %s steps with seed %s, this run has %d epochs of %d steps and seed %d (the learning-rate schedule and the data order depend on them)",
					cfg.Checkpoint, meta["epochs"], meta["steps_per_epoch"], meta["seed"], cfg.Epochs, perEpoch, cfg.Seed)
			}
			opt.SetSteps(start * perEpoch)
			st.ResumedFrom = start
			log.Info("train auxue: resumed", "checkpoint", cfg.Checkpoint, "epochs_done", start)
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("train auxue: resume: %w", err)
		}
	}
	x := nn.NewDense(B, C, gh, gw)
	xs := nn.Data(x)
	// A layout outlier moves every channel but the row coordinate (the
	// depth model's features move with the image); the model's channels
	// are normalized after they are read from the cache.
	mf, base, keep := st.Contract.Model, st.Contract.BaseChannels(), st.Contract.RowChannel()
	errs, valid, bins := make([]float32, B*g), make([]bool, B*g), make([]int32, B*g)
	disc, err := auxue.NewDiscretizer(cfg.K)
	if err != nil {
		return err
	}
	rec := layout.newRecord()
	scratch := make([]float32, g)
	order := make([]int, tc.n)
	bar := newProgress(cfg.Progress, "training", "steps", st.Steps-start*perEpoch)
	ph := &st.Phases
	trainStart := time.Now()
	trainTime := time.Duration(0)
	first := true
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x617578))
	orng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6f75746c))
	for i := range order {
		order[i] = i
	}
	for epoch := 0; epoch < start; epoch++ { // replay the draws of the epochs done
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for k := 0; k < perEpoch*B; k++ {
			auxue.MaybeOutlierKeep(orng, cfg.Outliers, cfg.OutlierKinds, xs[:C*g], C, gh, gw, keep, valid[:g], bins[:g], scratch)
		}
	}
	for epoch := start; epoch < cfg.Epochs; epoch++ {
		es := time.Now()
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		var sumA, sumE float64
		for k := 0; k < perEpoch; k++ {
			step := epoch*perEpoch + k
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("train auxue: stopped at step %d: %w", step, err)
			}
			t0 := time.Now()
			for b := 0; b < B; b++ {
				if err := tc.read(order[k*B+b], rec); err != nil {
					return err
				}
				copy(xs[b*C*g:(b+1)*C*g], rec.feats)
				if mf != nil {
					mf.Normalize(xs[b*C*g+base*g:(b+1)*C*g], g)
				}
				e, v, bn := errs[b*g:(b+1)*g], valid[b*g:(b+1)*g], bins[b*g:(b+1)*g]
				for j, x := range rec.errs {
					v[j] = x >= 0
					e[j] = max(x, 0)
				}
				if err := disc.PerImage(e, v, 1, g, bn); err != nil {
					return err
				}
				auxue.MaybeOutlierKeep(orng, cfg.Outliers, cfg.OutlierKinds, xs[b*C*g:(b+1)*C*g], C, gh, gw, keep, v, bn, scratch)
			}
			t1 := time.Now()
			nn.ZeroGrad(params)
			l, err := model.Step(x, errs, valid, bins)
			if err != nil {
				return fmt.Errorf("train auxue step %d: %w", step, err)
			}
			if math.IsNaN(l.Total()) || math.IsInf(l.Total(), 0) {
				return fmt.Errorf("train auxue: loss %v at step %d", l.Total(), step)
			}
			t2 := time.Now()
			if err := opt.Step(nn.PolyDecay(cfg.LR, cfg.EndLR, step, st.Steps, 0.9)); err != nil {
				return err
			}
			t3 := time.Now()
			ph.Batch += t1.Sub(t0)
			ph.Step += t2.Sub(t1)
			ph.Optimizer += t3.Sub(t2)
			sumA += l.Aleatoric
			sumE += l.Epistemic
			bar.set(step+1-start*perEpoch, fmt.Sprintf("epoch %d/%d laplace %.3f dido %.3f", epoch+1, cfg.Epochs, sumA/float64(k+1), sumE/float64(k+1)))
		}
		trainTime += time.Since(es)
		a, e := sumA/float64(perEpoch), sumE/float64(perEpoch)
		if first {
			st.FirstAlea, st.FirstEpis, st.FirstLoss = a, e, a+e
			first = false
		}
		st.LastAlea, st.LastEpis, st.LastLoss = a, e, a+e
		rep := EpochReport{Epoch: epoch + 1, Laplace: a, DIDO: e, AUSERMSE: math.NaN(), AURGRMSE: math.NaN(), SkyAUC: math.NaN(), NoGTAUC: math.NaN(),
			KS: [3]float64{math.NaN(), math.NaN(), math.NaN()}}
		if vc != nil {
			tv := time.Now()
			if err := validate(model, vc, layout, grid, st.Contract, &rep); err != nil {
				return fmt.Errorf("train auxue: validation after epoch %d: %w", epoch+1, err)
			}
			ph.Validate += time.Since(tv)
		}
		rep.Seconds = time.Since(es).Seconds()
		st.Epochs = append(st.Epochs, rep)
		log.Info("train auxue", "epoch", epoch+1, "of", cfg.Epochs, "laplace", a, "dido", e,
			"val_ause_rmse", rep.AUSERMSE, "val_aurg_rmse", rep.AURGRMSE, "val_sky_auc", rep.SkyAUC, "val_no_gt_auc", rep.NoGTAUC,
			"elapsed", time.Since(trainStart).Round(time.Second))
		if cfg.Checkpoint != "" {
			tk := time.Now()
			meta := map[string]string{"epoch": strconv.Itoa(epoch + 1), "epochs": strconv.Itoa(cfg.Epochs), "steps_per_epoch": strconv.Itoa(perEpoch),
				"seed": strconv.FormatInt(cfg.Seed, 10), "depth_sha256": st.DepthSHA256}
			if err := nn.SaveCheckpointFile(cfg.Checkpoint, append(append([]*nn.Param{}, params...), opt.StateParams()...), meta); err != nil {
				return err
			}
			ph.Checkpoint += time.Since(tk)
		}
	}
	bar.finish("")
	if ran := (cfg.Epochs - start) * perEpoch * B; ran > 0 {
		st.TrainFPS = float64(ran) / (ph.Batch + ph.Step + ph.Optimizer).Seconds()
	}
	return nil
}

// validate runs the Go AuxUE on the validation frames' cached features and
// computes, at the AuxUE's grid: AUSE and AURG of RMSE with the Laplace b
// as the uncertainty (sparsification per frame, 5% steps, averaged), the
// K/S AUC of sky blocks against blocks with ground truth (when the data
// has labels) and of blocks without ground truth against blocks with it.
func validate(model *auxue.Model, vc *cachedFrames, layout recordLayout, grid [2]int, contract auxue.InputContract, rep *EpochReport) error {
	gh, gw := grid[0], grid[1]
	g := gh * gw
	x := nn.NewDense(1, layout.C, gh, gw)
	rec := layout.newRecord()
	var pred auxue.Prediction
	sp := metrics.Sparsifier{}
	var rm metrics.SparsMean
	var sky, nogt metrics.BinaryScores
	ones, pe := make([]float32, g), make([]float32, g)
	allKS := make([]float32, 0, vc.n*g)
	for i := 0; i < vc.n; i++ {
		if err := vc.read(i, rec); err != nil {
			return err
		}
		copy(nn.Data(x), rec.feats)
		if mf := contract.Model; mf != nil {
			mf.Normalize(nn.Data(x)[contract.BaseChannels()*g:], g)
		}
		if err := model.Predict(x, 0.9, &pred); err != nil {
			return err
		}
		// RMSE of the block errors: ground truth 1 and prediction 1 + e
		// on labeled blocks, 0 (no ground truth) elsewhere.
		for k, e := range rec.errs {
			ones[k], pe[k] = 0, 0
			if e >= 0 {
				ones[k], pe[k] = 1, 1+e
			}
		}
		r, err := sp.Evaluate(pe, ones, pred.Scale, metrics.SparsRMSE)
		if err != nil {
			return err
		}
		rm.Add(r)
		allKS = append(allKS, pred.Epistemic[:g]...)
		for k, e := range rec.errs {
			ks := pred.Epistemic[k]
			if e >= 0 {
				if err := nogt.Add(ks, false); err != nil {
					return err
				}
				if rec.sky[k] != blockUnlabeled {
					if err := sky.Add(ks, false); err != nil {
						return err
					}
				}
				continue
			}
			if rec.sky[k] == blockSky {
				if err := sky.Add(ks, true); err != nil {
					return err
				}
			}
			if err := nogt.Add(ks, true); err != nil {
				return err
			}
		}
	}
	rep.AUSERMSE, rep.AURGRMSE, _ = rm.Mean()
	if len(allKS) > 0 {
		slices.Sort(allKS)
		for i, q := range []float64{0.5, 0.9, 0.99} {
			rep.KS[i] = float64(allKS[min(len(allKS)-1, int(q*float64(len(allKS))))])
		}
	}
	if p, n := sky.Counts(); p > 0 && n > 0 {
		rep.SkyAUC, _ = sky.AUC()
	}
	if p, n := nogt.Counts(); p > 0 && n > 0 {
		rep.NoGTAUC, _ = nogt.AUC()
	}
	return nil
}

// resolveFeatures resolves AuxTrainConfig.ModelFeatures to a tensor of
// the depth model (ok false: none).
func resolveFeatures(cfg AuxTrainConfig, spec infer.IOSpec) (FeatureChoice, bool, error) {
	switch cfg.ModelFeatures {
	case "", FeaturesOff:
		return FeatureChoice{}, false, nil
	case FeaturesAuto:
		return ChooseFeatureTensor(cfg.DepthModel, spec, cfg.Inference.Library)
	}
	fc, err := NamedFeatureTensor(cfg.DepthModel, spec, cfg.Inference.Library, cfg.ModelFeatures)
	return fc, err == nil, err
}

// featureStats sets the mean and standard deviation of each of the depth
// model's channels (after projection and resize, channels base... of every
// record) over the training cache; a constant channel keeps std 1.
func featureStats(tc *cachedFrames, layout recordLayout, base int, mf *auxue.ModelFeatures) error {
	g := layout.G
	sum, sq := make([]float64, mf.Out), make([]float64, mf.Out)
	rec := layout.newRecord()
	for i := 0; i < tc.n; i++ {
		if err := tc.read(i, rec); err != nil {
			return err
		}
		for o := 0; o < mf.Out; o++ {
			for _, v := range rec.feats[(base+o)*g : (base+o+1)*g] {
				sum[o] += float64(v)
				sq[o] += float64(v) * float64(v)
			}
		}
	}
	n := float64(tc.n * g)
	mf.Mean, mf.Std = make([]float32, mf.Out), make([]float32, mf.Out)
	for o := range sum {
		m := sum[o] / n
		sd := math.Sqrt(max(sq[o]/n-m*m, 0))
		if !(sd > 1e-6) {
			sd = 1
		}
		mf.Mean[o], mf.Std[o] = float32(m), float32(sd)
	}
	return mf.Validate()
}

// AutoEpochs is the epochs of a run that leaves them to the data: enough
// epochs of frames/batch steps to make about steps optimizer steps
// (ceil), at least MinAutoEpochs and at most MaxAutoEpochs. A small
// folder trains as many steps as a large one, each frame more often.
func AutoEpochs(frames, batch, steps int) int {
	per := max(frames/max(batch, 1), 1)
	return min(max((steps+per-1)/per, MinAutoEpochs), MaxAutoEpochs)
}

// Bounds of AutoEpochs.
const (
	MinAutoEpochs = 1
	MaxAutoEpochs = 100
)

// AuxContract is the AuxUE input contract for a depth model's spec: its
// image input read as is (layout, channel order, scaling), the depth in the
// spec's units, blocks of factor pixels, the grid padded to the DIDO head's
// bands.
func AuxContract(spec infer.IOSpec, factor, bands int, maxDepth float64, row bool) (auxue.InputContract, error) {
	pt := spec.Pixels()
	ch := spec.Input.Channels
	if ch == 0 {
		ch = 3
	}
	img, err := auxue.ImageFromPixels(spec.Layout() == infer.LayoutNHWC, ch, pt.Order, pt.Gain, pt.Offset)
	if err != nil {
		return auxue.InputContract{}, err
	}
	c := auxue.InputContract{Height: spec.Input.Height, Width: spec.Input.Width, Image: img, Factor: factor, Bands: bands,
		MaxDepth: float32(maxDepth), Relative: spec.Relative(), Row: row}
	return c, c.Validate()
}

// ReadSpec reads and checks a model's IO spec of the given kind.
func ReadSpec(path, kind string) (infer.IOSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return infer.IOSpec{}, fmt.Errorf("io spec: %w", err)
	}
	return infer.ParseIOSpecKind(data, path, kind)
}
