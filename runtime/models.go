package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/runtime/infer"
)

// Models are the depth model and the AuxUE of a runtime configuration
// (runtime/infer.Models): an RGB8 frame of any size in, depth, Laplace
// scale and K/S maps at the frame's size out. The pipeline and `didoedge
// calibrate` share it. Not safe for concurrent use.
type Models struct {
	cfg    *Config
	models *infer.Models
	depth  *infer.Session
	aux    *infer.Session
	inW    int // depth model input size
	inH    int

	// relative models: the alerts maps' depth and scale
	relDepth, relScale []float32
}

// StageTimes are the durations of one Infer call.
type StageTimes = infer.StageTimes

// ErrInvalidOutput marks a frame whose model outputs held NaN or Inf.
var ErrInvalidOutput = infer.ErrInvalidOutput

// Batch sizes (pipeline.batch_size): DefaultMaxBatch caps the default
// (min(cameras, DefaultMaxBatch) for dynamic-batch models on a GPU
// provider), MaxBatchSize the key.
const (
	DefaultMaxBatch = 4
	MaxBatchSize    = 16
)

// ModelsConfig returns the infer.ModelsConfig of the configuration.
func (c *Config) ModelsConfig() infer.ModelsConfig {
	mc := infer.ModelsConfig{Depth: c.Depth.Model, AuxUE: c.AuxUE.Model, AuxInputs: c.AuxUE.Inputs,
		DepthScale: c.AuxUE.DepthScale, Inference: c.Inference}
	if c.Depth.IO != nil {
		mc.DepthSpec = *c.Depth.IO
	}
	if c.AuxUE.IO != nil {
		mc.AuxUESpec = *c.AuxUE.IO
	}
	mc.DepthSpecFile, mc.AuxUESpecFile = c.Depth.specFile(), c.AuxUE.specFile()
	return mc
}

// specFile is the file the model's spec came from ("" = inline io).
func (m *ModelConfig) specFile() string {
	if m.Description != "" {
		return m.Description
	}
	return m.IOSpec
}

// OpenModels loads both models of cfg and checks that they fit together
// (one frame per run).
func OpenModels(ctx context.Context, cfg *Config, log *slog.Logger) (*Models, error) {
	return openModels(ctx, cfg, cfg.ModelsConfig(), log)
}

// OpenPipelineModels opens the models with the pipeline's batch size for
// the given number of cameras: pipeline.batch_size, or its default
// (DefaultBatchSize; MaxBatch tells what the models took). Benchmarks use
// it for the bound.
func OpenPipelineModels(ctx context.Context, cfg *Config, cameras int, log *slog.Logger) (*Models, error) {
	mc := cfg.ModelsConfig()
	mc.BatchSize = cfg.Pipeline.BatchSize
	if mc.BatchSize == 0 {
		mc.BatchSize, mc.BatchIfDynamic = cfg.DefaultBatchSize(cameras), true
	}
	m, err := openModels(ctx, cfg, mc, log)
	if err != nil && errors.Is(err, infer.ErrFixedBatch) {
		return nil, fmt.Errorf("pipeline.batch_size: %w", err)
	}
	return m, err
}

func openModels(ctx context.Context, cfg *Config, mc infer.ModelsConfig, log *slog.Logger) (*Models, error) {
	mo, err := infer.OpenModels(ctx, mc, log)
	if err != nil {
		return nil, err
	}
	m := &Models{cfg: cfg, models: mo, depth: mo.DepthSession(), aux: mo.AuxUESession()}
	m.inW, m.inH = mo.InputSize()
	if log != nil {
		log.Info("models loaded", "depth", cfg.Depth.Model, "auxue", cfg.AuxUE.Model,
			"provider", m.depth.Provider(), "library", m.depth.Library().Path, "input", fmt.Sprintf("%dx%d", m.inW, m.inH),
			"relative", mo.Relative(), "batch", mo.MaxBatch())
	}
	return m, nil
}

// Share returns a view of the same sessions with its own buffers, for
// one more camera (infer.Models.Share); use m and its views from one
// goroutine at a time.
func (m *Models) Share() (*Models, error) {
	v, err := m.models.Share()
	if err != nil {
		return nil, err
	}
	return &Models{cfg: m.cfg, models: v, depth: m.depth, aux: m.aux, inW: m.inW, inH: m.inH}, nil
}

// MaxBatch is the most frames one inferBatch takes.
func (m *Models) MaxBatch() int { return m.models.MaxBatch() }

// NewStaged allocates one staged frame (a camera keeps a few).
func (m *Models) NewStaged() *infer.Staged { return m.models.NewStaged() }

// Stage fits and normalizes a frame for the depth model into st; it may
// run on the camera's goroutine while the models run (infer.Models.Stage).
func (m *Models) Stage(st *infer.Staged, rgb []uint8, w, h int) error {
	return m.models.Stage(st, rgb, w, h)
}

// StageDirect stages a frame into the sessions' input slot itself, so
// that its batch of one copies nothing (infer.Models.StageDirect: the
// caller keeps every other batch away until this frame ran).
func (m *Models) StageDirect(st *infer.Staged, rgb []uint8, w, h int) error {
	return m.models.StageDirect(st, rgb, w, h)
}

// InferStaged runs frames staged by Stage as one batch through views (m
// and views of it from Share, at most MaxBatch), without a pipeline: the
// bound of `didoedge bench multicam`. scratch needs len(views) entries.
func (m *Models) InferStaged(ctx context.Context, views []*Models, staged []*infer.Staged, scratch []*infer.Models, t *StageTimes) error {
	return m.inferBatch(ctx, views, staged, scratch, t)
}

// inferBatch runs the frames staged for views (m and views of it) as one
// batch; each view's maps are then its result(). scratch holds len(views)
// entries, so that nothing is allocated.
func (m *Models) inferBatch(ctx context.Context, views []*Models, staged []*infer.Staged, scratch []*infer.Models, t *StageTimes) error {
	scratch = scratch[:len(views)]
	for k, v := range views {
		scratch[k] = v.models
	}
	return m.models.InferBatch(ctx, scratch, staged, t)
}

// result is the view's frame of the last inferBatch: the alerts' maps and
// the input-size image.
func (m *Models) result() (alerts.Maps, []uint8, error) {
	return m.alertsMaps(m.models.Result())
}

// alertsMaps turns the models' maps into the alerts' (relative depth for
// a relative model, see Infer).
func (m *Models) alertsMaps(im infer.Maps, img []uint8, err error) (alerts.Maps, []uint8, error) {
	if err != nil {
		return alerts.Maps{}, nil, err
	}
	maps := alerts.Maps{Width: im.Width, Height: im.Height, Depth: im.Depth, Scale: im.Scale, Epistemic: im.Epistemic}
	if im.Relative {
		maps.Depth, maps.Scale = m.relative(im)
	}
	return maps, img, nil
}

// Provider names the depth model's execution provider.
func (m *Models) Provider() string { return m.depth.Provider() }

// InputSize is the depth model's input width and height.
func (m *Models) InputSize() (w, h int) { return m.inW, m.inH }

// Relative reports whether the depth model is relative: the maps' depth is
// then a relative depth (no unit, see Infer) and only the epistemic and
// relative aleatoric read-outs mean anything.
func (m *Models) Relative() bool { return m.models.Relative() }

// Infer runs both models on an interleaved RGB8 image of any size; the maps
// come back at the image's size and alias buffers that the next call
// overwrites. It allocates nothing once the frame size is known.
//
// For a relative model the depth map is the relative depth
// D = (r_max - r_min) / (r - r_min + 0.05 (r_max - r_min)) of the relative
// inverse depth r (about 1 at the nearest pixel of the frame, 20 at the
// farthest) and the scale map is the AuxUE's relative b times D, so that
// scale/depth is the relative aleatoric read-out the alerts threshold.
func (m *Models) Infer(ctx context.Context, rgb []uint8, w, h int) (alerts.Maps, error) {
	var t StageTimes
	maps, _, err := m.infer(ctx, rgb, w, h, &t)
	return maps, err
}

// infer also returns the resized image and fills the stage times.
func (m *Models) infer(ctx context.Context, rgb []uint8, w, h int, t *StageTimes) (alerts.Maps, []uint8, error) {
	return m.alertsMaps(m.models.InferTimed(ctx, rgb, w, h, t))
}

// relative converts a relative model's maps to the alerts' depth and scale.
func (m *Models) relative(im infer.Maps) (depth, scale []float32) {
	n := len(im.Depth)
	if len(m.relDepth) != n {
		m.relDepth, m.relScale = make([]float32, n), make([]float32, n)
	}
	lo, hi := float32(0), float32(0)
	first := true
	for _, r := range im.Depth {
		if r-r != 0 {
			continue
		}
		if first {
			lo, hi, first = r, r, false
		}
		lo, hi = min(lo, r), max(hi, r)
	}
	span := hi - lo
	for i, r := range im.Depth {
		d := float32(0)
		if span > 0 && r-r == 0 {
			d = span / (r - lo + 0.05*span)
		}
		m.relDepth[i], m.relScale[i] = d, im.Scale[i]*d
	}
	return m.relDepth, m.relScale
}

// Close releases both sessions.
func (m *Models) Close() error { return m.models.Close() }

// DefaultBatchSize is what pipeline.batch_size 0 means for the given number
// of cameras: min(cameras, DefaultMaxBatch) frames per run when
// inference.providers names a GPU provider (tensorrt or cuda) and both
// models have a dynamic batch dimension (fixed-batch models run one frame
// per run), and 1 with the CPU provider alone. On a GPU a batch fills the
// device; on the CPU a run's cost grows with its frames, so a batch of 4
// buys 5 to 12 % throughput for the activations of 4 frames held at once
// (ONNX Runtime's arena: 1.69 x the RSS of one camera at 4 cameras against
// 1.26 x one frame per run, docs/runtime.md "Batching"). It is asked for,
// not imposed: a session that falls back from the GPU provider to the CPU
// runs one frame per run (runtime/infer, SessionOptions.IfDynamic).
func (c *Config) DefaultBatchSize(cameras int) int {
	for _, p := range c.Inference.Providers {
		if p.Name == infer.ProviderTensorRT || p.Name == infer.ProviderCUDA {
			return max(1, min(cameras, DefaultMaxBatch))
		}
	}
	return 1
}
