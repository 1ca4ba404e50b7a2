package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/runtime/infer"
)

// Models are the depth model and the AuxUE with every buffer between them
// allocated once: an RGB8 image in, depth, Laplace scale and K/S maps out.
// The pipeline and `didoedge calibrate` share it. Not safe for concurrent use.
type Models struct {
	cfg       *Config
	depth     *infer.Session
	aux       *infer.Session
	resizer   *Resizer
	inW, inH  int // depth model input size
	mapW      int // map size (depth output, AuxUE outputs)
	mapH      int
	depthBuf  []float32
	auxCopies []auxCopy
}

// auxCopy is one block of the AuxUE input: src (times scale) into dst.
type auxCopy struct {
	dst, src []float32
	scale    float32
}

// StageTimes are the durations of one Infer call.
type StageTimes struct {
	Preprocess, Depth, AuxUE, Readout time.Duration
}

// ErrInvalidOutput marks a frame whose model outputs held NaN or Inf.
var ErrInvalidOutput = errors.New("model output holds NaN or Inf")

// OpenModels loads both models of cfg and checks that they fit together.
func OpenModels(ctx context.Context, cfg *Config, log *slog.Logger) (_ *Models, err error) {
	// m is not the named result: "return nil, err" must not clear it before
	// the deferred Close runs.
	m := &Models{cfg: cfg}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	if m.depth, err = infer.NewSession(ctx, cfg.Depth.Model, *cfg.Depth.IO, cfg.Inference, log); err != nil {
		return nil, fmt.Errorf("depth model: %w", err)
	}
	if m.aux, err = infer.NewSession(ctx, cfg.AuxUE.Model, *cfg.AuxUE.IO, cfg.Inference, log); err != nil {
		return nil, fmt.Errorf("auxue model: %w", err)
	}
	if err = m.wire(); err != nil {
		return nil, err
	}
	if log != nil {
		log.Info("models loaded", "depth", cfg.Depth.Model, "auxue", cfg.AuxUE.Model,
			"provider", m.depth.Provider(), "library", m.depth.Library().Path, "input", fmt.Sprintf("%dx%d", m.inW, m.inH))
	}
	return m, nil
}

// InputSize is the depth model's input width and height.
func (m *Models) InputSize() (w, h int) { return m.inW, m.inH }

// MapSize is the size of the output maps.
func (m *Models) MapSize() (w, h int) { return m.mapW, m.mapH }

// wire checks the models against each other and lays out the buffers.
func (m *Models) wire() error {
	in := m.depth.InputShape()
	if len(in) != 4 || in[1] != 3 {
		return fmt.Errorf("depth model %q: input shape %v, want (1,3,H,W)", m.cfg.Depth.Model, in)
	}
	m.inH, m.inW = int(in[2]), int(in[3])
	dsh := m.depth.OutputShape(0)
	if len(dsh) != 4 || dsh[0] != 1 || dsh[1] != 1 {
		return fmt.Errorf("depth model %q: depth output %q has shape %v, want (1,1,H,W)", m.cfg.Depth.Model, m.depth.OutputNames()[0], dsh)
	}
	m.mapH, m.mapW = int(dsh[2]), int(dsh[3])
	plane := m.mapW * m.mapH
	m.depthBuf = make([]float32, plane)
	m.resizer = NewResizer(m.inW, m.inH)

	auxOut := m.aux.OutputNames()
	if len(auxOut) < 2 {
		return fmt.Errorf("auxue model %q: io spec lists outputs %v; want the scale (depth slot) and the epistemic map (first feature)", m.cfg.AuxUE.Model, auxOut)
	}
	for i := range auxOut {
		if n := len(m.aux.Output(i)); n != plane {
			return fmt.Errorf("auxue model %q: output %q has shape %v (%d values); it must be one %dx%d map like the depth",
				m.cfg.AuxUE.Model, auxOut[i], m.aux.OutputShape(i), n, m.mapW, m.mapH)
		}
	}
	ash := m.aux.InputShape()
	if len(ash) != 4 || ash[0] != 1 {
		return fmt.Errorf("auxue model %q: input shape %v, want (1,C,H,W)", m.cfg.AuxUE.Model, ash)
	}
	aplane := int(ash[2] * ash[3])
	dst := m.aux.Input()
	off := 0
	var layout []string
	for _, name := range m.cfg.AuxUE.Inputs {
		var src []float32
		scale := float32(1)
		switch name {
		case InputImage:
			src = m.depth.Input()
		case InputDepth:
			src, scale = m.depthBuf, m.cfg.AuxUE.DepthScale
		default:
			for i, n := range m.depth.OutputNames() {
				if n == name {
					src = m.depth.Output(i)
				}
			}
		}
		if len(src) == 0 || len(src)%aplane != 0 {
			return fmt.Errorf("auxue.inputs: %q has %d values, not a whole number of %dx%d planes (the AuxUE input is %v)",
				name, len(src), ash[3], ash[2], ash)
		}
		if off+len(src) > len(dst) {
			return fmt.Errorf("auxue.inputs %v: more channels than the AuxUE input %v has", m.cfg.AuxUE.Inputs, ash)
		}
		m.auxCopies = append(m.auxCopies, auxCopy{dst: dst[off : off+len(src)], src: src, scale: scale})
		layout = append(layout, fmt.Sprintf("%s:%d", name, len(src)/aplane))
		off += len(src)
	}
	if off != len(dst) {
		return fmt.Errorf("auxue.inputs %v give %d channels (%v), the AuxUE input %v wants %d",
			m.cfg.AuxUE.Inputs, off/aplane, layout, ash, ash[1])
	}
	return nil
}

// Infer runs both models on an interleaved RGB8 image of any size (it is
// resized to the model input). The maps alias buffers that the next call
// overwrites. It allocates nothing.
func (m *Models) Infer(ctx context.Context, rgb []uint8, w, h int) (alerts.Maps, error) {
	var t StageTimes
	maps, _, err := m.infer(ctx, rgb, w, h, &t)
	return maps, err
}

// infer also returns the resized image and fills the stage times.
func (m *Models) infer(ctx context.Context, rgb []uint8, w, h int, t *StageTimes) (alerts.Maps, []uint8, error) {
	t0 := time.Now()
	img, err := m.resizer.Resize(rgb, w, h)
	if err == nil {
		err = m.depth.SetImageRGB8(img, m.inW, m.inH, 3*m.inW)
	}
	if err != nil {
		return alerts.Maps{}, nil, fmt.Errorf("preprocess: %w", err)
	}
	t1 := time.Now()
	t.Preprocess = t1.Sub(t0)
	fr, err := m.depth.Run(ctx)
	if err != nil {
		return alerts.Maps{}, nil, err
	}
	t2 := time.Now()
	t.Depth = t2.Sub(t1)
	if !fr.Valid {
		return alerts.Maps{}, nil, ErrInvalidOutput
	}
	if _, err := m.depth.DepthInto(m.depthBuf); err != nil {
		return alerts.Maps{}, nil, err
	}
	for _, c := range m.auxCopies {
		if c.scale == 1 {
			copy(c.dst, c.src)
			continue
		}
		for i, v := range c.src {
			c.dst[i] = v * c.scale
		}
	}
	t3 := time.Now()
	t.Readout = t3.Sub(t2)
	fr, err = m.aux.Run(ctx)
	if err != nil {
		return alerts.Maps{}, nil, err
	}
	t.AuxUE = time.Since(t3)
	if !fr.Valid {
		return alerts.Maps{}, nil, ErrInvalidOutput
	}
	return alerts.Maps{Width: m.mapW, Height: m.mapH, Depth: m.depthBuf,
		Scale: m.aux.Output(0), Epistemic: m.aux.Output(1)}, img, nil
}

// Close releases both sessions.
func (m *Models) Close() error {
	var err error
	if m.aux != nil {
		err = m.aux.Close()
		m.aux = nil
	}
	if m.depth != nil {
		err = errors.Join(err, m.depth.Close())
		m.depth = nil
	}
	return err
}
