package infer

import (
	"math"

	"github.com/didoedge/didoedge/runtime/domain"
)

// AuxUEInfo is what train auxue records about an AuxUE: the model it
// belongs to, the recipe and the data. The runtime checks the depth
// model's sha256 against it (a mismatch is logged).
type AuxUEInfo struct {
	DepthModel       string  `yaml:"depth_model,omitempty"`
	DepthModelSHA256 string  `yaml:"depth_model_sha256,omitempty"`
	Factor           int     `yaml:"factor,omitempty"`
	GridHeight       int     `yaml:"grid_height,omitempty"`
	GridWidth        int     `yaml:"grid_width,omitempty"`
	MaxDepth         float64 `yaml:"max_depth,omitempty"`
	RowCoordinate    bool    `yaml:"row_coordinate,omitempty"`
	Encoders         string  `yaml:"encoders,omitempty"`
	EncoderWidth     int     `yaml:"encoder_width,omitempty"`
	Hidden           int     `yaml:"hidden,omitempty"`
	Aleatoric        string  `yaml:"aleatoric,omitempty"`
	K                int     `yaml:"k,omitempty"`
	Lambda           float64 `yaml:"lambda,omitempty"`
	UnlabeledKL      float64 `yaml:"unlabeled_kl,omitempty"`
	GlobalContext    int     `yaml:"global_context_bands,omitempty"`
	Data             string  `yaml:"data,omitempty"`
	Frames           int     `yaml:"frames,omitempty"`
	// ModelFeatureChannels is how many channels the AuxUE makes of the
	// depth model's tensor (a projection when it has more).
	ModelFeatureChannels int `yaml:"model_feature_channels,omitempty"`
	// ModelFeatureHeads is which heads read them: both, or dido (the
	// Laplace head on the image and the depth alone).
	ModelFeatureHeads string `yaml:"model_feature_heads,omitempty"`
	// Validation describes the AuxUE's epistemic read-out on its own
	// validation frames (in distribution by construction): calibration
	// compares its data with it to notice frames the AuxUE has never seen
	// the like of.
	Validation *AuxUEValidation `yaml:"validation,omitempty"`
	// Teacher names the depth model that labelled the training frames
	// without ground truth (train auxue --teacher) and how many target
	// pixels came from it and from real ground truth; nil: every target
	// was real ground truth.
	Teacher *AuxUETeacher `yaml:"teacher,omitempty"`
	// Domain is the training-domain record (package runtime/domain, its
	// own version key): what a frame of the training domain looks like to
	// the models, from held-out frames. The streaming core's domain
	// monitor and calibration measure frames against it. AuxUEs trained
	// before it have none (DomainRecord says so).
	Domain *domain.Record `yaml:"domain,omitempty"`
}

// DomainRecord returns the AuxUE's training-domain record, or
// ErrNoDomainRecord.
func (s IOSpec) DomainRecord() (*domain.Record, error) {
	if s.AuxUE == nil || s.AuxUE.Domain == nil {
		return nil, ErrNoDomainRecord
	}
	return s.AuxUE.Domain, nil
}

// AuxUETeacher is the teacher of an AuxUE trained with train auxue
// --teacher: the model, its sha256, the range beyond which it gave no
// target, and the target pixels of the training frames by source.
type AuxUETeacher struct {
	Model         string  `yaml:"model"`
	SHA256        string  `yaml:"sha256"`
	Relative      bool    `yaml:"relative,omitempty"`
	MaxDepth      float64 `yaml:"max_depth"`
	TeacherPixels int64   `yaml:"teacher_pixels"`
	RealPixels    int64   `yaml:"real_pixels"`
	FramesWithGT  int     `yaml:"frames_with_ground_truth"`
	// IgnoredGroundTruth: the frames' own ground truth was left out
	// (train auxue --ignore-ground-truth).
	IgnoredGroundTruth bool `yaml:"ignored_ground_truth,omitempty"`
}

// AuxUEValidation are quantiles of K/S over every block of the AuxUE's
// validation frames (at its grid), as train auxue measured them after the
// last epoch.
type AuxUEValidation struct {
	Frames int     `yaml:"frames"`
	KSP50  float64 `yaml:"ks_p50"`
	KSP90  float64 `yaml:"ks_p90"`
	KSP99  float64 `yaml:"ks_p99"`
}

func (s IOSpec) validateAuxUE(name func(key, n string), add func(string, ...any)) {
	if s.Depth != (OutputSpec{}) {
		add("depth: an AuxUE has no depth output; name its Laplace scale output under scale and its K/S output under epistemic")
	}
	if len(s.Features) > 0 {
		add("features: an AuxUE has no feature outputs (scale, epistemic and alpha only)")
	}
	if s.Confidence != nil {
		add("confidence: only a depth model has it; an AuxUE's uncertainty is its scale and epistemic outputs")
	}
	if s.OwnsInputs() {
		name("depth_input", s.DepthInput.Name)
		if u := s.DepthInput.Units; u != UnitsMetres && u != UnitsRelative {
			add("depth_input.units: %q is not one of metres, relative", u)
		}
	} else if s.DepthInput.Units != "" {
		add("depth_input.name: empty")
	}
	if f := s.ModelFeatures; f != nil {
		if !s.OwnsInputs() {
			add("model_features: only an AuxUE with depth_input reads a depth-model tensor this way (a features-input AuxUE lists it in the runtime config's auxue.inputs)")
		}
		name("model_features", f.Name)
		if f.Tensor == "" {
			add("model_features.tensor: empty; name the depth model's tensor")
		}
		if f.Channels < 1 || f.Channels > 1<<16 || f.Height < 1 || f.Height > maxSide || f.Width < 1 || f.Width > maxSide {
			add("model_features: channels %d, height %d, width %d out of range", f.Channels, f.Height, f.Width)
		}
	}
	name("scale", s.Scale.Name)
	name("epistemic", s.Epistemic.Name)
	if s.Alpha.Name != "" {
		name("alpha", s.Alpha.Name)
	}
	switch s.Scale.Units {
	case "", UnitsMetres, UnitsRelative:
	default:
		add("scale.units: %q is not one of metres, relative", s.Scale.Units)
	}
	if s.OwnsInputs() && s.Scale.Units != "" && s.Scale.Units != s.DepthInput.Units {
		add("scale.units: %q but depth_input.units %q: both are metres or both relative", s.Scale.Units, s.DepthInput.Units)
	}
	for _, t := range []struct {
		key string
		v   TensorSpec
	}{{"epistemic", s.Epistemic}, {"alpha", s.Alpha}} {
		if t.v.Units != "" {
			add("%s.units: only depth_input and scale have units", t.key)
		}
	}
	if a := s.AuxUE; a != nil {
		if a.K == 1 {
			add("auxue.k: 1, want 0 (unknown) or >= 2: DIDO discretizes the errors into K >= 2 bins")
		}
		if a.DepthModelSHA256 != "" && !sha256Pattern.MatchString(a.DepthModelSHA256) {
			add("auxue.depth_model_sha256: %q is not 64 lower-case hex digits", a.DepthModelSHA256)
		}
		if a.Domain != nil {
			if err := a.Domain.Validate(); err != nil {
				add("auxue.domain.%v", err)
			}
		}
		for _, v := range []struct {
			key string
			n   int
		}{{"factor", a.Factor}, {"grid_height", a.GridHeight}, {"grid_width", a.GridWidth}, {"encoder_width", a.EncoderWidth},
			{"hidden", a.Hidden}, {"k", a.K}, {"global_context_bands", a.GlobalContext}, {"frames", a.Frames}} {
			if v.n < 0 || v.n > maxSide*maxSide {
				add("auxue.%s: %d is out of range", v.key, v.n)
			}
		}
		for _, v := range []struct {
			key string
			f   float64
		}{{"max_depth", a.MaxDepth}, {"lambda", a.Lambda}, {"unlabeled_kl", a.UnlabeledKL}} {
			if !(v.f >= 0) || math.IsInf(v.f, 0) {
				add("auxue.%s: %g must be non-negative and finite", v.key, v.f)
			}
		}
	}
}
