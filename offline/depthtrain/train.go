package depthtrain

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/offline/depthnet"
	"github.com/didoedge/didoedge/pkg/nn"
)

// TrainConfig configures Train. Zero fields take the defaults in brackets.
type TrainConfig struct {
	Net depthnet.Config
	// Seed fixes the data order, crops and flips (the weights follow Net.Seed).
	Seed int64
	// Drives x FramesPerDrive is the pool of distinct training frames [48 x 200].
	Drives, FramesPerDrive int
	// ValFrames frames from ValDrives further drives (never trained on) are
	// evaluated every ValEvery steps [8 from 4, every 200].
	ValFrames, ValDrives, ValEvery int
	// Width and Height of the rendered frames [640 x 192].
	Width, Height int
	// Steps, Batch and CropWidth (a multiple of 16) [1500, 4, 256].
	Steps, Batch, CropWidth int
	// CropsPerFrame crops are cut from each rendered frame [2]; rendering
	// costs about a third of a step otherwise.
	CropsPerFrame int
	// LR decays polynomially (power 0.9) to EndLR [1e-3 -> 1e-5].
	LR, EndLR float64
	// Lambda of the SILog loss [0.85].
	Lambda float64
	// Log receives progress lines; nil discards them.
	Log *slog.Logger
	// ConvWorkers is the number of goroutines each convolution splits its
	// passes across (nn.Conv2d.SetWorkers) [GOMAXPROCS]; 1 suits a caller
	// that trains several networks at once. The weights do not depend on it.
	ConvWorkers int
}

func (c *TrainConfig) defaults() {
	PoolDefaults(&c.Drives, &c.FramesPerDrive, &c.Width, &c.Height)
	setDefault(&c.ValFrames, 8)
	setDefault(&c.ValDrives, 4)
	setDefault(&c.ValEvery, 200)
	setDefault(&c.Steps, 1500)
	setDefault(&c.Batch, 4)
	setDefault(&c.CropWidth, 256)
	setDefault(&c.CropsPerFrame, 2)
	setDefault(&c.LR, 1e-3)
	setDefault(&c.EndLR, 1e-5)
	setDefault(&c.Lambda, 0.85)
	if c.Net == (depthnet.Config{}) {
		c.Net = depthnet.DefaultConfig()
	}
	c.Net.Height = c.Height
}

// setDefault sets *v to d when it holds the zero value (a config field
// left out).
func setDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// PoolDefaults fills the frame pool both trainings draw from (the AuxUE
// learns on the main model's training distribution): 48 drives x 200
// frames of 640 x 192.
func PoolDefaults(drives, framesPerDrive, width, height *int) {
	setDefault(drives, 48)
	setDefault(framesPerDrive, 200)
	setDefault(width, 640)
	setDefault(height, 192)
}

// TrainStats summarizes a run.
type TrainStats struct {
	Steps          int
	FirstLoss      float64 // mean loss of the first 10% of the steps
	LastLoss       float64 // mean loss of the last 10% of the steps
	ValAbsRel      float64 // AbsRel on the validation frames at the end
	Duration       time.Duration
	DistinctFrames int // size of the frame pool
}

// Train trains a depth network from scratch on the simulated outdoor world
// with sparse ground truth only, using random horizontal crops (full height,
// so the row coordinate keeps its meaning) and random mirroring.
func Train(ctx context.Context, cfg TrainConfig) (*depthnet.Net, TrainStats, error) {
	cfg.defaults()
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.CropWidth%16 != 0 || cfg.CropWidth > cfg.Width {
		return nil, TrainStats{}, fmt.Errorf("train depth: crop width %d must be a multiple of 16 and at most %d", cfg.CropWidth, cfg.Width)
	}
	net, err := depthnet.New(cfg.Net)
	if err != nil {
		return nil, TrainStats{}, err
	}
	net.SetWorkers(cfg.ConvWorkers)
	src, err := NewSimSource(cfg.Seed, cfg.Drives, cfg.FramesPerDrive, cfg.Width, cfg.Height)
	if err != nil {
		return nil, TrainStats{}, err
	}
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x747261696e))
	H, cw, B := cfg.Height, cfg.CropWidth, cfg.Batch
	x := nn.NewDense(B, 3, H, cw)
	gt := make([]float32, B*H*cw)
	dz := nn.NewDense(B, 1, H, cw)
	xs := nn.Data(x)
	params := net.Params()
	opt := nn.NewAdam(params, nn.AdamConfig{})
	loss := SILog{Lambda: cfg.Lambda, MaxDepth: cfg.Net.MaxDepth}
	start := time.Now()
	st := TrainStats{Steps: cfg.Steps, DistinctFrames: cfg.Drives * cfg.FramesPerDrive}
	tenth := max(1, cfg.Steps/10)
	var first, last float64
	var firstN, lastN int
	var window float64
	for step := 0; step < cfg.Steps; step++ {
		if err := ctx.Err(); err != nil {
			return nil, st, fmt.Errorf("train depth: stopped at step %d: %w", step, err)
		}
		var f *sim.Frame
		for b := 0; b < B; b++ {
			if b%cfg.CropsPerFrame == 0 {
				if f, err = src.Sample(rng); err != nil {
					return nil, st, err
				}
			}
			x0 := rng.IntN(cfg.Width-cw+1) &^ 1
			flip := rng.IntN(2) == 1
			NormalizeRGB(f.RGB, cfg.Width, H, x0, cw, flip, xs[b*3*H*cw:(b+1)*3*H*cw])
			CropMap(f.Sparse, cfg.Width, H, x0, cw, flip, gt[b*H*cw:(b+1)*H*cw])
		}
		nn.ZeroGrad(params)
		z, err := net.Forward(x, nn.Train)
		if err != nil {
			return nil, st, err
		}
		l, _, err := loss.LossGrad(nn.Data(z), gt, nn.Data(dz))
		if err != nil {
			return nil, st, err
		}
		if math.IsNaN(l) || math.IsInf(l, 0) {
			return nil, st, fmt.Errorf("train depth: loss %v at step %d", l, step)
		}
		if err := net.Backward(dz); err != nil {
			return nil, st, err
		}
		if err := opt.Step(nn.PolyDecay(cfg.LR, cfg.EndLR, step, cfg.Steps, 0.9)); err != nil {
			return nil, st, err
		}
		if step < tenth {
			first += l
			firstN++
		}
		if step >= cfg.Steps-tenth {
			last += l
			lastN++
		}
		window += l
		if (step+1)%cfg.ValEvery == 0 || step+1 == cfg.Steps {
			absRel, err := Validate(net, cfg)
			if err != nil {
				return nil, st, err
			}
			n := cfg.ValEvery
			if (step+1)%cfg.ValEvery != 0 {
				n = (step + 1) % cfg.ValEvery
			}
			log.Info("train depth", "step", step+1, "of", cfg.Steps, "loss", window/float64(n),
				"val_absrel", absRel, "elapsed", time.Since(start).Round(time.Second))
			window = 0
			st.ValAbsRel = absRel
		}
	}
	st.FirstLoss, st.LastLoss = first/float64(firstN), last/float64(lastN)
	st.Duration = time.Since(start)
	return net, st, nil
}

// Validate runs the network in Go on cfg.ValFrames full frames of the
// validation drives (indices Drives .. Drives+ValDrives-1 of the same seed,
// never trained on) and returns their mean per-image AbsRel.
func Validate(net *depthnet.Net, cfg TrainConfig) (float64, error) {
	cfg.defaults()
	if cfg.ValFrames == 0 {
		return math.NaN(), nil
	}
	src, err := NewSimSource(cfg.Seed, cfg.Drives+cfg.ValDrives, cfg.FramesPerDrive, cfg.Width, cfg.Height)
	if err != nil {
		return 0, err
	}
	W, H := cfg.Width, cfg.Height
	x := nn.NewDense(1, 3, H, W)
	depth := make([]float32, H*W)
	var total float64
	for k := 0; k < cfg.ValFrames; k++ {
		d := cfg.Drives + k%cfg.ValDrives
		f, err := src.Render(d, (k*37)%cfg.FramesPerDrive)
		if err != nil {
			return 0, err
		}
		NormalizeRGB(f.RGB, W, H, 0, W, false, nn.Data(x))
		z, err := net.Forward(x, nn.Eval)
		if err != nil {
			return 0, err
		}
		net.Depth(nn.Data(z), depth)
		var s float64
		n := 0
		for i, y := range f.Sparse {
			if y > 0 {
				s += math.Abs(float64(depth[i]-y)) / float64(y)
				n++
			}
		}
		if n > 0 {
			total += s / float64(n)
		}
	}
	return total / float64(cfg.ValFrames), nil
}
