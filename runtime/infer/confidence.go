package infer

import (
	"fmt"
	"math"
)

// Meanings of a depth model's confidence output (ConfidenceSpec.Meaning):
// what the published model trained its map toward. docs/models.md cites
// each convention's source.
const (
	// ConfidenceLogError: the value estimates the scale-invariant log error
	// e = |ln d - ln y| of the pixel's depth (UniDepthV2). With activation
	// exp the model exports exp(e) (UniDepthV2's decoder returns the exp
	// of its clipped head output as `confidence`).
	ConfidenceLogError = "log_error"
	// ConfidenceRelativeErrorComplement: the value c was trained toward
	// 1 - |d - y|/y (Metric3D v2's `confidence`), so 1 - c estimates the
	// relative error.
	ConfidenceRelativeErrorComplement = "relative_error_complement"
	// ConfidenceRanking: larger is more confident, and only the order of
	// the values within one image means something (Depth Anything 3's
	// `conf`, exp(x) + 1 >= 1, which its API thresholds at a percentile of
	// each image).
	ConfidenceRanking = "ranking"
	// ConfidenceSpread: the value is the spread of an ensemble of
	// predictions (Marigold: the standard deviation, or with median
	// reduction the median absolute deviation, of the aligned ensemble
	// members, divided by the depth range), larger is less certain.
	ConfidenceSpread = "spread"
	// ConfidenceValidity: the value is the probability that the pixel's
	// prediction is valid (MoGe's `mask`, a sigmoid that its API
	// binarizes at 0.5).
	ConfidenceValidity = "validity"
)

// ActivationExp is the one activation a log_error output may declare: the
// model exports exp(e) instead of e.
const ActivationExp = "exp"

// ConfidenceSpec is a depth model's own confidence output and how to read
// it: one closed form per meaning of the raw value v into an uncertainty
// u, larger always meaning less trustworthy (ConfidenceSpec.Readout):
//
//	log_error                  u = exp(v) - 1        (activation exp: u = v - 1, v = exp(e))
//	relative_error_complement  u = 1 - v
//	ranking                    u = 1 / v             (v > 0)
//	spread                     u = v                 (v >= 0)
//	validity                   u = 1 - v             (v in [0, 1])
//
// log_error and relative_error_complement give u as an estimate of the
// relative error |d - y|/y (exp(e) - 1 is the relative error of a depth
// too far by the factor exp(e)); a ranking has no unit (only its order
// within a frame counts); a spread is in the units the model's ensemble
// was normalized to; validity's u is the probability that the pixel is
// invalid (u > 0.5 is MoGe's mask off). The calibration sets tau_c from
// clear frames whatever the unit.
type ConfidenceSpec struct {
	// Name is the model's output; it must be one map of the depth
	// output's size.
	Name    string `yaml:"name"`
	Meaning string `yaml:"meaning"`
	// Activation is "" or exp (log_error only): the function the model
	// applied to its error estimate before exporting it.
	Activation string `yaml:"activation,omitempty"`
}

// validate checks the keys against the meaning.
func (c ConfidenceSpec) validate(add func(string, ...any)) {
	switch c.Meaning {
	case ConfidenceLogError, ConfidenceRelativeErrorComplement, ConfidenceRanking, ConfidenceSpread, ConfidenceValidity:
	case "":
		add("confidence.meaning: empty; one of log_error, relative_error_complement, ranking, spread, validity")
		return
	default:
		add("confidence.meaning: %q is not one of log_error, relative_error_complement, ranking, spread, validity", c.Meaning)
		return
	}
	switch c.Activation {
	case "":
	case ActivationExp:
		if c.Meaning != ConfidenceLogError {
			add("confidence.activation: exp applies to meaning log_error only, not %s", c.Meaning)
		}
	default:
		add("confidence.activation: %q is not exp (or empty)", c.Activation)
	}
}

// ErrorEstimate reports whether the read-out u estimates the relative
// depth error |d - y|/y (log_error, relative_error_complement), rather
// than a ranking, a spread or a validity.
func (c ConfidenceSpec) ErrorEstimate() bool {
	return c.Meaning == ConfidenceLogError || c.Meaning == ConfidenceRelativeErrorComplement
}

// ConfidenceReadout is a ConfidenceSpec's read-out, applied per frame.
type ConfidenceReadout struct {
	meaning string
	exp     bool
}

// Readout returns the spec's read-out.
func (c ConfidenceSpec) Readout() ConfidenceReadout {
	return ConfidenceReadout{meaning: c.Meaning, exp: c.Activation == ActivationExp}
}

// Apply writes the uncertainty u of every raw value of src into dst (same
// length, which may be src itself). A value outside the meaning's domain
// (non-finite; ranking v <= 0; spread v < 0; validity outside [0, 1];
// log_error with activation exp v <= 0) becomes NaN, the map's "no
// confidence", and is counted.
func (r ConfidenceReadout) Apply(dst, src []float32) (invalid int) {
	dst = dst[:len(src)]
	nan := float32(math.NaN())
	switch {
	case r.meaning == ConfidenceLogError && r.exp:
		for i, v := range src {
			// exp(ln v) - 1: the model's exp(e) is the depth ratio itself.
			if !(v > 0) || v-v != 0 {
				dst[i] = nan
				invalid++
				continue
			}
			dst[i] = v - 1
		}
	case r.meaning == ConfidenceLogError:
		for i, v := range src {
			if v-v != 0 {
				dst[i] = nan
				invalid++
				continue
			}
			// expm1 keeps the relative precision of small errors, where
			// exp(e) - 1 in float32 would round e < 6e-8 to 0.
			dst[i] = float32(math.Expm1(float64(v)))
		}
	case r.meaning == ConfidenceRelativeErrorComplement:
		for i, v := range src {
			if v-v != 0 {
				dst[i] = nan
				invalid++
				continue
			}
			dst[i] = 1 - v
		}
	case r.meaning == ConfidenceRanking:
		for i, v := range src {
			if !(v > 0) || v-v != 0 {
				dst[i] = nan
				invalid++
				continue
			}
			dst[i] = 1 / v
		}
	case r.meaning == ConfidenceSpread:
		for i, v := range src {
			if !(v >= 0) || v-v != 0 {
				dst[i] = nan
				invalid++
				continue
			}
			dst[i] = v
		}
	case r.meaning == ConfidenceValidity:
		for i, v := range src {
			if !(v >= 0 && v <= 1) {
				dst[i] = nan
				invalid++
				continue
			}
			dst[i] = 1 - v
		}
	default:
		for i := range src {
			dst[i] = nan
		}
		invalid = len(src)
	}
	return invalid
}

// Meaning is the read-out's meaning.
func (r ConfidenceReadout) Meaning() string { return r.meaning }

// checkConfidenceShape checks that the confidence output is one map of the
// depth output's size (the read-out resamples both with the same remap).
func checkConfidenceShape(name string, shape []int64, depthH, depthW int) error {
	h, w, err := MapShape(shape)
	if err != nil {
		return fmt.Errorf("confidence: output %q: %w", name, err)
	}
	if h != depthH || w != depthW {
		return fmt.Errorf("confidence: output %q is %dx%d (W x H), the depth output is %dx%d: the confidence must be on the depth map's grid", name, w, h, depthW, depthH)
	}
	return nil
}
