package infer

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// CheckPair checks a depth model's spec and an AuxUE's spec against each
// other, without the models: an AuxUE that owns its inputs must read the
// depth model's image input as the depth model receives it (every key of
// input but name and resize equal) and its depth in the depth model's
// units; a features-input AuxUE must name known sources.
func CheckPair(depth, aux IOSpec, auxInputs []string) error {
	if depth.IsAuxUE() {
		return errors.New("the depth model's spec describes an AuxUE (kind: auxue)")
	}
	if !aux.IsAuxUE() {
		return errors.New("the AuxUE's spec describes a depth model; an AuxUE's spec has kind: auxue, scale and epistemic")
	}
	if !aux.OwnsInputs() {
		known := []string{SourceImage, SourceDepth}
		for _, f := range depth.Features {
			known = append(known, f.Name)
		}
		if len(auxInputs) == 0 {
			return fmt.Errorf("auxue.inputs: empty; a features-input AuxUE (no depth_input) needs its sources, from %s", strings.Join(known, ", "))
		}
		for i, in := range auxInputs {
			if !contains(known, in) {
				return fmt.Errorf("auxue.inputs[%d]: %q is not one of %s", i, in, strings.Join(known, ", "))
			}
			if in == SourceImage && depth.Layout() != LayoutNCHW {
				return fmt.Errorf("auxue.inputs[%d]: image: a features input takes NCHW planes, the depth model's input is %s", i, depth.Layout())
			}
		}
		return nil
	}
	if len(auxInputs) > 0 {
		return fmt.Errorf("auxue.inputs %v: the AuxUE computes its own features from the image and the depth (depth_input %q); leave inputs out", auxInputs, aux.DepthInput.Name)
	}
	d, a := depth.Input, aux.Input
	var diff []string
	cmp := func(key string, dv, av any) {
		if fmt.Sprint(dv) != fmt.Sprint(av) {
			diff = append(diff, fmt.Sprintf("input.%s: depth model %v, AuxUE %v", key, dv, av))
		}
	}
	cmp("layout", depth.Layout(), aux.Layout())
	cmp("channels", depth.channels(), aux.channels())
	cmp("height", d.Height, a.Height)
	cmp("width", d.Width, a.Width)
	cmp("color", orDefault(d.Color, ColorRGB), orDefault(a.Color, ColorRGB))
	cmp("pixel_range", depth.pixelRange(), aux.pixelRange())
	cmp("mean", depth.means(), aux.means())
	cmp("std", depth.stds(), aux.stds())
	if len(diff) > 0 {
		return fmt.Errorf("the AuxUE was built for another input than the depth model's (%s); retrain it with train auxue on this depth model",
			strings.Join(diff, "; "))
	}
	want := UnitsMetres
	if depth.Relative() {
		want = UnitsRelative
	}
	if aux.DepthInput.Units != want {
		return fmt.Errorf("auxue depth_input.units: %q, but the depth model's depth.meaning %q gives %s", aux.DepthInput.Units, depth.Depth.Meaning, want)
	}
	return nil
}

// DefaultAuxInputs are the sources of a features-input AuxUE that a config
// leaves out: the depth model's first feature output (made for the AuxUE),
// or else the image and the depth. An AuxUE that owns its inputs takes none.
func DefaultAuxInputs(depth, aux IOSpec) []string {
	if aux.OwnsInputs() {
		return nil
	}
	if len(depth.Features) > 0 {
		return []string{depth.Features[0].Name}
	}
	return []string{SourceImage, SourceDepth}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// wire checks the loaded models against each other and lays out the
// buffers.
func (m *Models) wire(log *slog.Logger) error {
	m.inW, m.inH = m.cfg.DepthSpec.Input.Width, m.cfg.DepthSpec.Input.Height
	m.outW, m.outH = m.depth.MapSize(0)
	m.depthOut = make([]float32, m.outW*m.outH)
	m.depthIn = m.depthOut
	if c := m.cfg.DepthSpec.Confidence; c != nil {
		for i, n := range m.depth.OutputNames() {
			if n == c.Name {
				m.confOut = i
			}
		}
		if m.confOut < 0 {
			return fmt.Errorf("depth model %q: confidence: no output %q", m.cfg.Depth, c.Name)
		}
		if w, h := m.depth.MapSize(m.confOut); w != m.outW || h != m.outH {
			return fmt.Errorf("depth model %q: confidence: output %q is %dx%d, the depth output %dx%d", m.cfg.Depth, c.Name, w, h, m.outW, m.outH)
		}
		m.confRead = c.Readout()
		m.confMap = make([]float32, m.outW*m.outH)
	}
	if m.outW != m.inW || m.outH != m.inH {
		m.toInput = NewRemap(Fit(m.inW, m.inH, m.inW, m.inH, ResizeStretch), m.outW, m.outH)
		m.depthIn = make([]float32, m.inW*m.inH)
	}
	if m.aux == nil {
		return nil
	}
	if want := m.cfg.AuxUESpec.AuxUE; want != nil && want.DepthModelSHA256 != "" && want.DepthModelSHA256 != m.depth.SHA256() {
		log.Warn("the AuxUE was trained on another depth model file", "auxue", m.cfg.AuxUE,
			"trained_on_sha256", want.DepthModelSHA256, "depth", m.cfg.Depth, "depth_sha256", m.depth.SHA256())
	}
	m.auxW, m.auxH = m.aux.MapSize(0)
	if w, h := m.aux.MapSize(1); w != m.auxW || h != m.auxH {
		return fmt.Errorf("auxue model %q: scale map %dx%d and epistemic map %dx%d differ", m.cfg.AuxUE, m.auxW, m.auxH, w, h)
	}
	if m.cfg.AuxUESpec.OwnsInputs() {
		if f := m.cfg.AuxUESpec.ModelFeatures; f != nil {
			if m.featOut < 0 {
				return fmt.Errorf("auxue model_features: the depth model has no tensor %q", f.Tensor)
			}
			if got, want := m.depth.OutputShape(m.featOut), []int64{1, int64(f.Channels), int64(f.Height), int64(f.Width)}; fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("auxue model_features: the depth model's tensor %q has shape %v, the AuxUE was trained on %v; retrain it with train auxue on this depth model",
					f.Tensor, got, want)
			}
		}
		return nil
	}
	ash := m.aux.InputShape()
	aplane := int(ash[2] * ash[3])
	dst := m.aux.Input()
	off := 0
	var layout []string
	for _, name := range m.cfg.AuxInputs {
		var src []float32
		scale := float32(1)
		kind := auxSrcImage
		switch name {
		case SourceImage:
			src = m.depth.Input()
		case SourceDepth:
			src, scale, kind = m.depthOut, m.cfg.DepthScale, auxSrcDepth
			if scale == 0 {
				scale = 1
			}
		default:
			for i, n := range m.depth.OutputNames() {
				if n == name {
					src, kind = m.depth.Output(i), i
				}
			}
		}
		if len(src) == 0 || len(src)%aplane != 0 {
			return fmt.Errorf("auxue.inputs: %q has %d values, not a whole number of %dx%d planes (the AuxUE input is %v)",
				name, len(src), ash[3], ash[2], ash)
		}
		if off+len(src) > len(dst) {
			return fmt.Errorf("auxue.inputs %v: more channels than the AuxUE input %v has", m.cfg.AuxInputs, ash)
		}
		m.auxCopies = append(m.auxCopies, auxCopy{off: off, n: len(src), src: kind, scale: scale})
		layout = append(layout, fmt.Sprintf("%s:%d", name, len(src)/aplane))
		off += len(src)
	}
	if off != len(dst) {
		return fmt.Errorf("auxue.inputs %v give %d channels (%v), the AuxUE input %v wants %d",
			m.cfg.AuxInputs, off/aplane, layout, ash, ash[1])
	}
	return nil
}
