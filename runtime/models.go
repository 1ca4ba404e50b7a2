package runtime

import (
	"context"
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

// OpenModels loads both models of cfg and checks that they fit together.
func OpenModels(ctx context.Context, cfg *Config, log *slog.Logger) (*Models, error) {
	mo, err := infer.OpenModels(ctx, cfg.ModelsConfig(), log)
	if err != nil {
		return nil, err
	}
	m := &Models{cfg: cfg, models: mo, depth: mo.DepthSession(), aux: mo.AuxUESession()}
	m.inW, m.inH = mo.InputSize()
	if log != nil {
		log.Info("models loaded", "depth", cfg.Depth.Model, "auxue", cfg.AuxUE.Model,
			"provider", m.depth.Provider(), "library", m.depth.Library().Path, "input", fmt.Sprintf("%dx%d", m.inW, m.inH),
			"relative", mo.Relative())
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
	im, img, err := m.models.InferTimed(ctx, rgb, w, h, t)
	if err != nil {
		return alerts.Maps{}, nil, err
	}
	maps := alerts.Maps{Width: im.Width, Height: im.Height, Depth: im.Depth, Scale: im.Scale, Epistemic: im.Epistemic}
	if im.Relative {
		maps.Depth, maps.Scale = m.relative(im)
	}
	return maps, img, nil
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
