package infer

// The depth output's transforms: each meaning of OutputSpec is one closed
// form of the raw value v, folded here into one of two loops so that the
// frame path stays a multiply-add (or a division) per pixel.

// Readout is an OutputSpec's transform with its constants folded: depth
// d = A v + B (Inverse false) or d = A / (v + B) (Inverse true); a
// relative read-out r = A v.
type Readout struct {
	A, B     float32
	Inverse  bool
	Relative bool
}

// Readout folds the spec's transform; focal is f_input / canonical_focal
// for a camera-dependent metric_depth output (1 otherwise, and ignored
// when canonical_focal is not set).
//
//	metric_depth       d = (k v + t) f           A = k f, B = t f
//	disparity,
//	inverse_depth      d = k f / (v + t)         A = k f, B = t
//	sigmoid_disparity  d = k / (lo + (hi-lo) v)  A = k/(hi-lo), B = lo/(hi-lo)
//	                   (lo = 1/max_depth, hi = 1/min_depth)
//	relative           r = k v                   A = k
func (o OutputSpec) Readout(focal float64) Readout {
	k := float64(o.Scale)
	if k == 0 {
		k = 1
	}
	switch o.Meaning {
	case MeaningRelative:
		return Readout{A: float32(k), Relative: true}
	case MeaningMetricDepth:
		f := 1.0
		if o.CanonicalFocal > 0 {
			f = focal
		}
		return Readout{A: float32(k * f), B: float32(float64(o.Shift) * f)}
	case MeaningSigmoidDisparity:
		lo, hi := 1/float64(o.MaxDepth), 1/float64(o.MinDepth)
		return Readout{A: float32(k / (hi - lo)), B: float32(lo / (hi - lo)), Inverse: true}
	}
	f := 1.0
	if o.CanonicalFocal > 0 {
		f = focal
	}
	return Readout{A: float32(k * f), B: o.Shift, Inverse: true}
}

// Apply writes the read-out of src into dst (same length): metres, where a
// value that is NaN, Inf or not positive becomes 0 (no depth) and is
// counted; or, relative, A v where only non-finite values become 0.
func (r Readout) Apply(dst, src []float32) (invalid int) {
	a, b := r.A, r.B
	switch {
	case r.Relative:
		for i, v := range src {
			d := v * a
			if d-d != 0 {
				d = 0
				invalid++
			}
			dst[i] = d
		}
	case r.Inverse:
		for i, v := range src {
			d := a / (v + b)
			if d-d != 0 || d <= 0 {
				d = 0
				invalid++
			}
			dst[i] = d
		}
	default:
		for i, v := range src {
			d := v*a + b
			if d-d != 0 || d <= 0 {
				d = 0
				invalid++
			}
			dst[i] = d
		}
	}
	return invalid
}

// NeedsFocal reports whether the read-out needs the camera's focal length
// (a canonical-camera output: Metric3D, Depth Pro).
func (o OutputSpec) NeedsFocal() bool {
	return o.CanonicalFocal > 0 && (o.Meaning == MeaningMetricDepth || o.Meaning == MeaningDisparity || o.Meaning == MeaningInverseDepth)
}

// FocalFactor is f_input / canonical_focal: fx, the camera's focal length
// in pixels of a frame frameW wide, scaled into the model input the way
// the frame is (Geometry: the frame's CW / FrameW). 1 when the output does
// not depend on the camera.
func (o OutputSpec) FocalFactor(fx float64, g Geometry) float64 {
	if !o.NeedsFocal() {
		return 1
	}
	return fx * float64(g.CW) / float64(g.FrameW) / float64(o.CanonicalFocal)
}

// Direction says how the read-out's values relate to distance, for
// messages: "depth" (larger is farther) or "inverse" (relative inverse
// depth, larger is nearer).
func (o OutputSpec) Direction() string {
	if o.Meaning == MeaningRelative {
		return "inverse"
	}
	return "depth"
}
