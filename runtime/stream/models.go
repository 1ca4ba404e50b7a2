package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// Models are the depth model and the AuxUE of a runtime configuration:
// infer.Models (staging, batching, the sessions), plus what the alerts
// need from it: maps in the alerts' terms (alerts.Maps, with the relative
// depth of a relative model, see relative). Not safe for concurrent use.
type Models struct {
	*infer.Models

	// relative models: the alerts maps' depth and scale
	relDepth, relScale []float32
}

// StageTimes are the durations of one inference.
type StageTimes = infer.StageTimes

// ErrInvalidOutput marks a frame whose model outputs held NaN or Inf.
var ErrInvalidOutput = infer.ErrInvalidOutput

// OpenPipelineModels opens the models with the pipeline's batch size for
// the given number of cameras: pipeline.batch_size, or its default
// (DefaultBatchSize; MaxBatch tells what the models took). Benchmarks use
// it for the bound.
func OpenPipelineModels(ctx context.Context, cfg *runconfig.Config, cameras int, log *slog.Logger) (*Models, error) {
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

func openModels(ctx context.Context, cfg *runconfig.Config, mc infer.ModelsConfig, log *slog.Logger) (*Models, error) {
	mo, err := infer.OpenModels(ctx, mc, log)
	if err != nil {
		return nil, err
	}
	m := &Models{Models: mo}
	if log != nil {
		w, h := mo.InputSize()
		log.Info("models loaded", "depth", cfg.Depth.Model, "auxue", cfg.AuxUE.Model,
			"provider", mo.DepthSession().Provider(), "library", mo.DepthSession().Library().Path, "input", fmt.Sprintf("%dx%d", w, h),
			"relative", mo.Relative(), "batch", mo.MaxBatch())
	}
	return m, nil
}

// Share returns a view of the same sessions with its own buffers, for
// one more camera (infer.Models.Share); use m and its views from one
// goroutine at a time.
func (m *Models) Share() (*Models, error) {
	v, err := m.Models.Share()
	if err != nil {
		return nil, err
	}
	return &Models{Models: v}, nil
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
		scratch[k] = v.Models
	}
	return m.Models.InferBatch(ctx, scratch, staged, t)
}

// result is the view's frame of the last inferBatch: the alerts' maps and
// the input-size image.
func (m *Models) result() (alerts.Maps, []uint8, error) {
	return m.alertsMaps(m.Models.Result())
}

// modelMaps are the view's maps of the last inferBatch as the models gave
// them (frame-size and on their own grids), for the recorder.
func (m *Models) modelMaps() infer.Maps {
	im, _, _ := m.Models.Result()
	return im
}

// alertsMaps turns the models' maps into the alerts' (relative depth for
// a relative model, see relative).
func (m *Models) alertsMaps(im infer.Maps, img []uint8, err error) (alerts.Maps, []uint8, error) {
	if err != nil {
		return alerts.Maps{}, nil, err
	}
	maps := alerts.Maps{Width: im.Width, Height: im.Height, Depth: im.Depth, Scale: im.Scale, Epistemic: im.Epistemic, Confidence: im.Confidence}
	if im.Relative {
		maps.Depth, maps.Scale = m.relative(im)
	}
	return maps, img, nil
}

// relative converts a relative model's maps to the alerts' depth and scale:
// the depth map becomes the relative depth
// D = (r_max - r_min) / (r - r_min + 0.05 (r_max - r_min)) of the relative
// inverse depth r (about 1 at the nearest pixel of the frame, 20 at the
// farthest) and the scale map the AuxUE's relative b times D, so that
// scale/depth is the relative aleatoric read-out the alerts threshold.
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
