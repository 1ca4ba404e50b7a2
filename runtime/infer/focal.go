package infer

import (
	"fmt"
	"math"
)

// SetFocal gives the camera's focal length fx in pixels of frames calibW
// pixels wide (0: of the frames Infer gets; fx then follows the frame,
// fx_frame = fx W_frame / calibW). A depth output with canonical_focal
// (Metric3D) needs it: its metres are d_canonical f_input /
// canonical_focal, f_input = fx_frame CW / W_frame, CW the width the frame
// takes in the input. Each view (Share) has its own camera.
func (m *Models) SetFocal(fx float64, calibW int) error {
	if !(fx > 0) || math.IsInf(fx, 0) || calibW < 0 {
		return fmt.Errorf("camera focal length fx %g (of frames %d wide) must be positive and finite", fx, calibW)
	}
	m.fx, m.calibW = fx, calibW
	if m.haveGeo {
		m.setReadout()
	}
	return nil
}

// FrameFocal is SetFocal for frames that carry their own intrinsics (data
// sets): fx of frames w wide, taken when the read-out needs a focal length
// and fx is known (> 0); otherwise nothing changes.
func (m *Models) FrameFocal(fx float64, w int) {
	if m.NeedsFocal() && fx > 0 && !math.IsInf(fx, 0) && w > 0 && (fx != m.fx || w != m.calibW) {
		m.fx, m.calibW = fx, w
		if m.haveGeo {
			m.setReadout()
		}
	}
}

// NeedsFocal reports whether the depth read-out needs SetFocal.
func (m *Models) NeedsFocal() bool { return m.cfg.DepthSpec.Depth.NeedsFocal() }

// FocalFactor is the factor a camera-dependent depth output is multiplied
// by at the current frame size (f_input / canonical_focal); 1 otherwise.
func (m *Models) FocalFactor() float64 {
	if !m.NeedsFocal() || m.fx == 0 || !m.haveGeo {
		return 1
	}
	return m.focalFactor()
}

func (m *Models) focalFactor() float64 {
	fxFrame := m.fx
	if m.calibW > 0 {
		fxFrame = m.fx * float64(m.geo.FrameW) / float64(m.calibW)
	}
	return m.cfg.DepthSpec.Depth.FocalFactor(fxFrame, m.geo)
}

// setReadout folds the depth transform for the current frame size.
func (m *Models) setReadout() {
	f := 1.0
	if m.NeedsFocal() && m.fx > 0 {
		f = m.focalFactor()
	}
	m.readout = m.cfg.DepthSpec.Depth.Readout(f)
}

// focalReady refuses a camera-dependent read-out without the camera's fx.
func (m *Models) focalReady() error {
	if m.NeedsFocal() && m.fx == 0 {
		return fmt.Errorf("depth.canonical_focal %g: the depth model %q predicts depth for a canonical camera, and its metres need this camera's focal length: give the camera's intrinsics (intrinsics or intrinsics_file in the camera's config, --intrinsics for model run and eval-quick)",
			m.cfg.DepthSpec.Depth.CanonicalFocal, m.cfg.Depth)
	}
	return nil
}
