package auxue

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/didoedge/didoedge/pkg/nn"
)

// Objective is what Train optimizes: one mini-batch step and a validation pass.
type Objective interface {
	// Step runs forward and backward on the training samples idx, adding to
	// the parameters' gradients, and returns the batch's mean loss.
	Step(idx []int) (float64, error)
	// Validate returns the validation loss (NaN when there is no validation set).
	Validate() (float64, error)
	// Params lists the trainable parameters with their names.
	Params() []NamedParam
}

// TrainConfig controls Train.
type TrainConfig struct {
	Epochs    int
	BatchSize int
	// LR decays polynomially to EndLR over all steps (nn.PolyDecay with Power);
	// EndLR = 0 with Power = 0 keeps LR constant.
	LR, EndLR, Power float64
	Adam             nn.AdamConfig
	// Seed drives the per-epoch shuffling.
	Seed uint64
	// Progress receives one line per epoch (nil: silent); Name prefixes it.
	Progress io.Writer
	Name     string
}

// EpochStats summarizes one epoch.
type EpochStats struct {
	Epoch            int
	TrainLoss        float64 // mean of the batch losses
	ValLoss          float64 // NaN without a validation set
	LR               float64 // learning rate of the epoch's last step
	Duration         time.Duration
	Steps, TotalStep int
}

// Train runs mini-batch Adam over n training samples, shuffled every epoch
// with a PCG seeded by cfg.Seed (the last batch may be smaller). It stops with
// an error naming the step and the tensor when the loss, a gradient or a
// parameter stops being finite, and with ctx.Err() when ctx is cancelled.
func Train(ctx context.Context, obj Objective, n int, cfg TrainConfig) ([]EpochStats, error) {
	switch {
	case n < 1:
		return nil, fmt.Errorf("train %s: no training samples", cfg.Name)
	case cfg.Epochs < 1 || cfg.BatchSize < 1:
		return nil, fmt.Errorf("train %s: epochs %d and batch size %d must be positive", cfg.Name, cfg.Epochs, cfg.BatchSize)
	case !(cfg.LR > 0) || cfg.EndLR < 0 || cfg.Power < 0:
		return nil, fmt.Errorf("train %s: learning rate %v -> %v (power %v) invalid", cfg.Name, cfg.LR, cfg.EndLR, cfg.Power)
	}
	named := obj.Params()
	params := make([]*nn.Param, len(named))
	for i, p := range named {
		params[i] = p.Param
	}
	opt := nn.NewAdam(params, cfg.Adam)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x747261696e))
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	stepsPerEpoch := (n + cfg.BatchSize - 1) / cfg.BatchSize
	total := stepsPerEpoch * cfg.Epochs
	endLR := cfg.EndLR
	if endLR == 0 && cfg.Power == 0 {
		endLR = cfg.LR
	}
	var history []EpochStats
	step := 0
	for epoch := 1; epoch <= cfg.Epochs; epoch++ {
		start := time.Now()
		rng.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		var sum float64
		var lr float64
		for b := 0; b < n; b += cfg.BatchSize {
			if err := ctx.Err(); err != nil {
				return history, fmt.Errorf("train %s: epoch %d step %d: %w", cfg.Name, epoch, step, err)
			}
			idx := perm[b:min(b+cfg.BatchSize, n)]
			nn.ZeroGrad(params)
			loss, err := obj.Step(idx)
			if err != nil {
				return history, fmt.Errorf("train %s: step %d: %w", cfg.Name, step, err)
			}
			if math.IsNaN(loss) || math.IsInf(loss, 0) {
				return history, fmt.Errorf("train %s: step %d: loss is %v", cfg.Name, step, loss)
			}
			if err := checkFinite(named, true); err != nil {
				return history, fmt.Errorf("train %s: step %d: %w", cfg.Name, step, err)
			}
			lr = nn.PolyDecay(cfg.LR, endLR, step, total, cfg.Power)
			if err := opt.Step(lr); err != nil {
				return history, fmt.Errorf("train %s: step %d: %w", cfg.Name, step, err)
			}
			if err := checkFinite(named, false); err != nil {
				return history, fmt.Errorf("train %s: step %d: after the update: %w", cfg.Name, step, err)
			}
			sum += loss
			step++
		}
		val, err := obj.Validate()
		if err != nil {
			return history, fmt.Errorf("train %s: epoch %d validation: %w", cfg.Name, epoch, err)
		}
		st := EpochStats{Epoch: epoch, TrainLoss: sum / float64(stepsPerEpoch), ValLoss: val, LR: lr,
			Duration: time.Since(start), Steps: stepsPerEpoch, TotalStep: step}
		history = append(history, st)
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "%s epoch %d/%d  train %.5f  val %.5f  lr %.3g  %s\n",
				cfg.Name, epoch, cfg.Epochs, st.TrainLoss, st.ValLoss, lr, st.Duration.Round(time.Millisecond))
		}
	}
	return history, nil
}

// checkFinite names the first parameter (or its gradient) holding NaN or Inf.
func checkFinite(named []NamedParam, grads bool) error {
	for _, p := range named {
		what, t := "parameter", p.Value
		if grads {
			what, t = "gradient of", p.Grad
		}
		for i, v := range nn.Data(t) {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("%s %s is %v at index %d", what, p.Name, v, i)
			}
		}
	}
	return nil
}
