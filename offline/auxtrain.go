package offline

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/auxue/nn"
)

// AuxTrainConfig configures AuxTrain. Zero fields take the defaults in brackets.
type AuxTrainConfig struct {
	// DepthModel and DepthSpec are the frozen main model and its IO spec;
	// Library is the ONNX Runtime library ("" = runtime/infer's lookup).
	DepthModel, DepthSpec, Library string
	// MaxDepth scales the depth channel (depth / MaxDepth) [80].
	MaxDepth float64
	// Seed, Drives and FramesPerDrive select the frames as for the depth
	// network (use the same values: the AuxUE learns on the main model's
	// training distribution, as in the paper) [1, 48, 200].
	Seed                   int64
	Drives, FramesPerDrive int
	// Width and Height of the frames [640 x 192].
	Width, Height int
	// Frames are drawn from the pool, run through the depth model once and
	// cached at half resolution [300].
	Frames int
	// Epochs over the cached frames and the Batch size [15, 2].
	Epochs, Batch int
	// LR decays polynomially (power 0.9) to EndLR [2e-3 -> 1e-5].
	LR, EndLR float64
	// EncoderWidth and Hidden of the AuxUE [8, 8]; K and Lambda of DIDO [32, 0.01].
	EncoderWidth, Hidden, K int
	Lambda                  float64
	// UnlabeledKL keeps gamma * Lambda * KL(Dir(alpha) || Dir(1)) on the
	// blocks without ground truth (auxue.Config.UnlabeledKL); 0 trains DIDO
	// on the labeled blocks only.
	UnlabeledKL float64
	// GlobalContext joins each pixel's DIDO features with the frame's
	// channel means (auxue.Config.GlobalContext).
	GlobalContext bool
	// GlobalContextBands is auxue.Config.GlobalContextBands.
	GlobalContextBands int
	// Outliers is the fraction of batch items replaced by a layout outlier
	// of one of OutlierKinds made from the drawn frame; its blocks count as
	// without ground truth (only the unlabeled KL applies). 0 disables.
	Outliers     float64
	OutlierKinds []auxue.OutlierKind
	// Log receives progress lines; nil discards them.
	Log *slog.Logger
}

func (c *AuxTrainConfig) defaults() {
	poolDefaults(&c.Drives, &c.FramesPerDrive, &c.Width, &c.Height)
	setDefault(&c.Frames, 300)
	setDefault(&c.Epochs, 15)
	setDefault(&c.Batch, 2)
	setDefault(&c.EncoderWidth, 8)
	setDefault(&c.Hidden, 8)
	setDefault(&c.K, auxue.DefaultKDepth)
	setDefault(&c.MaxDepth, 80)
	setDefault(&c.Seed, 1)
	setDefault(&c.LR, 2e-3)
	setDefault(&c.EndLR, 1e-5)
	setDefault(&c.Lambda, auxue.DefaultLambdaDepth)
}

// AuxModelConfig is the generalized AuxUE of the depth task: dense, input
// the depth model's aux_features (in channels: RGB + depth [+ decoder
// features]), separate encoders, Laplace sigma_Theta1, DIDO sigma_Theta2.
func (c AuxTrainConfig) AuxModelConfig(in int) auxue.Config {
	c.defaults()
	return auxue.Config{Form: auxue.FormDense, In: in, EncoderWidth: c.EncoderWidth,
		SharedEncoder: false, Hidden: c.Hidden, Aleatoric: auxue.AleatoricLoss{Kind: auxue.Laplace},
		K: c.K, Lambda: c.Lambda, UnlabeledKL: c.UnlabeledKL, GlobalContext: c.GlobalContext, GlobalContextBands: c.GlobalContextBands, Seed: uint64(c.Seed)}
}

// AuxStats summarizes an AuxUE run.
type AuxStats struct {
	Frames, Steps        int
	Factor               int     // the AuxUE's downsampling, read from the depth model's aux_features
	FirstLoss, LastLoss  float64 // mean total loss of the first and last epoch
	FirstAlea, LastAlea  float64
	FirstEpis, LastEpis  float64
	MeanTrainAbsRel      float64 // the frozen depth model's AbsRel on the cached frames
	CacheTime, TrainTime time.Duration
}

// auxCache holds the half-resolution training tensors of the cached frames.
type auxCache struct {
	feats  []float32 // frames x ch x hw2
	ch     int
	h2, w2 int // AuxUE resolution
	factor int
	errs   []float32 // frames x hw2
	valid  []bool
	bins   []int32
	hw2    int
}

// AuxTrain freezes the depth model, runs it through ONNX Runtime on
// simulated frames, and trains the generalized AuxUE on its errors against
// the sparse ground truth (pixel-wise discretization per image over the
// valid pixels, K bins).
func AuxTrain(ctx context.Context, cfg AuxTrainConfig) (*auxue.Model, AuxStats, error) {
	cfg.defaults()
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var st AuxStats
	if cfg.Height%2 != 0 || cfg.Width%2 != 0 {
		return nil, st, fmt.Errorf("train auxue: size %dx%d must be even", cfg.Width, cfg.Height)
	}
	if cfg.Outliers < 0 || cfg.Outliers >= 1 || (cfg.Outliers > 0 && len(cfg.OutlierKinds) == 0) {
		return nil, st, fmt.Errorf("train auxue: outlier fraction %v with kinds %v, want [0, 1) and a kind", cfg.Outliers, cfg.OutlierKinds)
	}
	start := time.Now()
	cache, absRel, err := buildAuxCache(ctx, cfg, log)
	if err != nil {
		return nil, st, err
	}
	st.Frames, st.MeanTrainAbsRel, st.CacheTime, st.Factor = cfg.Frames, absRel, time.Since(start), cache.factor
	model, err := auxue.NewModel(cfg.AuxModelConfig(cache.ch))
	if err != nil {
		return nil, st, err
	}
	named := model.Params()
	params := make([]*nn.Param, len(named))
	for i, p := range named {
		params[i] = p.Param
	}
	opt := nn.NewAdam(params, nn.AdamConfig{})
	h2, w2, hw2, B := cache.h2, cache.w2, cache.hw2, cfg.Batch
	C := cache.ch
	x := nn.NewDense(B, C, h2, w2)
	xs := nn.Data(x)
	errs, valid, bins := make([]float32, B*hw2), make([]bool, B*hw2), make([]int32, B*hw2)
	perEpoch := cfg.Frames / B
	st.Steps = perEpoch * cfg.Epochs
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x617578))
	orng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6f75746c))
	scratch := make([]float32, hw2)
	order := make([]int, cfg.Frames)
	for i := range order {
		order[i] = i
	}
	trainStart := time.Now()
	step := 0
	for epoch := 0; epoch < cfg.Epochs; epoch++ {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		var sumA, sumE float64
		for k := 0; k < perEpoch; k++ {
			if err := ctx.Err(); err != nil {
				return nil, st, fmt.Errorf("train auxue: stopped at step %d: %w", step, err)
			}
			for b := 0; b < B; b++ {
				f := order[k*B+b]
				copy(xs[b*C*hw2:(b+1)*C*hw2], cache.feats[f*C*hw2:(f+1)*C*hw2])
				copy(errs[b*hw2:(b+1)*hw2], cache.errs[f*hw2:(f+1)*hw2])
				copy(valid[b*hw2:(b+1)*hw2], cache.valid[f*hw2:(f+1)*hw2])
				copy(bins[b*hw2:(b+1)*hw2], cache.bins[f*hw2:(f+1)*hw2])
				auxue.MaybeOutlier(orng, cfg.Outliers, cfg.OutlierKinds, xs[b*C*hw2:(b+1)*C*hw2], C, h2, w2,
					valid[b*hw2:(b+1)*hw2], bins[b*hw2:(b+1)*hw2], scratch)
			}
			nn.ZeroGrad(params)
			l, err := model.Step(x, errs, valid, bins)
			if err != nil {
				return nil, st, fmt.Errorf("train auxue step %d: %w", step, err)
			}
			if math.IsNaN(l.Total()) || math.IsInf(l.Total(), 0) {
				return nil, st, fmt.Errorf("train auxue: loss %v at step %d", l.Total(), step)
			}
			if err := opt.Step(nn.PolyDecay(cfg.LR, cfg.EndLR, step, st.Steps, 0.9)); err != nil {
				return nil, st, err
			}
			sumA += l.Aleatoric
			sumE += l.Epistemic
			step++
		}
		a, e := sumA/float64(perEpoch), sumE/float64(perEpoch)
		if epoch == 0 {
			st.FirstAlea, st.FirstEpis, st.FirstLoss = a, e, a+e
		}
		st.LastAlea, st.LastEpis, st.LastLoss = a, e, a+e
		log.Info("train auxue", "epoch", epoch+1, "of", cfg.Epochs, "laplace", a, "dido", e,
			"elapsed", time.Since(trainStart).Round(time.Second))
	}
	st.TrainTime = time.Since(trainStart)
	return model, st, nil
}

func buildAuxCache(ctx context.Context, cfg AuxTrainConfig, log *slog.Logger) (*auxCache, float64, error) {
	runner, err := OpenDepthRunner(ctx, cfg.DepthModel, cfg.DepthSpec, cfg.Library, log)
	if err != nil {
		return nil, 0, err
	}
	defer runner.Close()
	src, err := NewSimSource(cfg.Seed, cfg.Drives, cfg.FramesPerDrive, cfg.Width, cfg.Height)
	if err != nil {
		return nil, 0, err
	}
	W, H := cfg.Width, cfg.Height
	C, h2, w2 := runner.AuxShape()
	if h2 == 0 || H%h2 != 0 || W != w2*(H/h2) {
		return nil, 0, fmt.Errorf("train auxue: aux_features %dx%d does not divide the %dx%d frame", w2, h2, W, H)
	}
	hw2 := h2 * w2
	c := &auxCache{hw2: hw2, ch: C, h2: h2, w2: w2, factor: H / h2, feats: make([]float32, cfg.Frames*C*hw2),
		errs: make([]float32, cfg.Frames*hw2), valid: make([]bool, cfg.Frames*hw2), bins: make([]int32, cfg.Frames*hw2)}
	disc, err := auxue.NewDiscretizer(cfg.K)
	if err != nil {
		return nil, 0, err
	}
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6361636865))
	var absRel float64
	start := time.Now()
	for f := 0; f < cfg.Frames; f++ {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		fr, err := src.Sample(rng)
		if err != nil {
			return nil, 0, err
		}
		_, depth, aux, err := runner.Predict(ctx, fr.RGB, W, H)
		if err != nil {
			return nil, 0, err
		}
		var s float64
		n := 0
		for i, y := range fr.Sparse {
			if y > 0 {
				s += math.Abs(float64(depth[i]-y)) / float64(y)
				n++
			}
		}
		if n > 0 {
			absRel += s / float64(n)
		}
		copy(c.feats[f*C*hw2:(f+1)*C*hw2], aux)
		e, v := c.errs[f*hw2:(f+1)*hw2], c.valid[f*hw2:(f+1)*hw2]
		auxue.BlockErrors(depth, fr.Sparse, H, W, c.factor, e, v)
		if err := disc.PerImage(e, v, 1, hw2, c.bins[f*hw2:(f+1)*hw2]); err != nil {
			return nil, 0, err
		}
		if (f+1)%50 == 0 || f+1 == cfg.Frames {
			log.Info("train auxue: depth model on training frames", "frames", f+1, "of", cfg.Frames,
				"elapsed", time.Since(start).Round(time.Second))
		}
	}
	return c, absRel / float64(cfg.Frames), nil
}
