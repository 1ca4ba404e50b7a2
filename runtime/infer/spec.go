package infer

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/didoedge/didoedge/internal/yamlstrict"

	"github.com/didoedge/didoedge/pkg/mapgrid"
)

// Model kinds of an IOSpec.
const (
	KindDepth = "depth" // an image in, a depth map (and optional features) out
	KindAuxUE = "auxue" // an AuxUE: scale and epistemic maps out
)

// Input layouts.
const (
	LayoutNCHW = "NCHW" // (1, C, H, W), planar
	LayoutNHWC = "NHWC" // (1, H, W, C), interleaved
)

// Channel orders of an image input.
const (
	ColorRGB = "rgb"
	ColorBGR = "bgr"
)

// How a camera frame of another size is fitted into the model input.
const (
	// ResizeStretch scales the frame to the input size (the aspect ratio
	// may change).
	ResizeStretch = mapgrid.Stretch
	// ResizeLetterbox scales it uniformly to fit and pads the rest with
	// black, centred.
	ResizeLetterbox = mapgrid.Letterbox
)

// Depth output meanings.
const (
	MeaningMetricDepth  = "metric_depth"  // depth in metres = value * scale
	MeaningDisparity    = "disparity"     // depth = scale / value (scale = focal * baseline)
	MeaningInverseDepth = "inverse_depth" // depth = scale / value
	// MeaningRelative is affine-invariant inverse depth (MiDaS, Depth
	// Anything): value = s/depth + t with s > 0 and t unknown per frame.
	// Metres come only from aligning a frame to ground truth (Align). An
	// output that grows with depth (negative disparity) is declared with a
	// negative scale: the read-out scale*value is then larger = nearer.
	MeaningRelative = "relative"
	// MeaningSigmoidDisparity is monodepth2's and Lite-Mono's output: a
	// sigmoid s in [0,1] mapped to inverse depth between max_depth and
	// min_depth, 1/d = 1/max_depth + (1/min_depth - 1/max_depth) s, and d
	// times scale (5.4 for monodepth2's stereo models).
	MeaningSigmoidDisparity = "sigmoid_disparity"
)

// Units of an AuxUE's depth input and scale output.
const (
	// UnitsMetres: the depth input is the main model's depth in metres and
	// the scale output is the Laplace b in metres.
	UnitsMetres = "metres"
	// UnitsRelative: the depth input is the main model's relative inverse
	// depth and the scale output is b relative to the depth (b/d, no unit).
	UnitsRelative = "relative"
)

// Output roles, the keys under which an IOSpec names its outputs.
const (
	RoleDepth     = "depth"     // depth models: the depth map
	RoleFeatures  = "features"  // depth models: extra outputs an AuxUE may read
	RoleScale     = "scale"     // AuxUE: Laplace scale b
	RoleEpistemic = "epistemic" // AuxUE: DIDO K/S
	RoleAlpha     = "alpha"     // AuxUE: Dirichlet alpha at the AuxUE's grid
	// RoleConfidence is a depth model's own per-pixel confidence (or
	// uncertainty, or validity) map, read by ConfidenceSpec.
	RoleConfidence = "confidence"
)

// IOSpec is the description of one model's inputs and outputs: the one type
// that `didoedge train depth|auxue` writes beside each model and that run,
// calibrate, eval-quick, train auxue and `model run` read, so that a shape
// one of them accepts, all accept. A depth model:
//
//	kind: depth                      # default
//	input: {name: image, layout: NCHW, height: 192, width: 640, color: rgb,
//	        pixel_range: 1, mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], resize: stretch}
//	depth: {name: depth, meaning: metric_depth, scale: 1}
//	features: [{name: enc4}]         # optional extra outputs for an AuxUE
//	confidence: {name: conf, meaning: ranking}  # optional: the model's own confidence map
//
// An AuxUE that owns its input contract reads the depth model's image
// input as the depth model receives it and its depth map, and computes its
// features in its own graph:
//
//	kind: auxue
//	input: {...the depth model's input section...}
//	depth_input: {name: depth, units: metres}
//	scale: {name: scale, units: metres}
//	epistemic: {name: epistemic}
//	alpha: {name: alpha}
//	auxue: {depth_model_sha256: ..., factor: 4, k: 32, ...}
//
// Such an AuxUE may also read one of the depth model's own tensors
// (model_features: the tensor's name in the depth model's graph and its
// shape); the runtime exposes that tensor as an extra output of the depth
// model when it loads it, so the depth model's file stays as it is:
//
//	model_features: {name: model_features, tensor: relu_7, channels: 32, height: 24, width: 80}
//
// An AuxUE without depth_input reads one "features" tensor (1,C,H,W) that
// the runtime assembles from its auxue.inputs (the image, the depth, depth
// model outputs exposed with `didoedge model expose`).
type IOSpec struct {
	Kind  string    `yaml:"kind,omitempty"`
	Input InputSpec `yaml:"input"`
	// DepthInput is the AuxUE's depth input (1,1,H,W) at the input size.
	DepthInput TensorSpec `yaml:"depth_input,omitempty"`
	// ModelFeatures is an AuxUE input fed with a tensor of the depth model.
	ModelFeatures *ModelFeatureInput `yaml:"model_features,omitempty"`

	Depth     OutputSpec    `yaml:"depth,omitempty"`
	Features  []FeatureSpec `yaml:"features,omitempty"`
	Scale     TensorSpec    `yaml:"scale,omitempty"`
	Epistemic TensorSpec    `yaml:"epistemic,omitempty"`
	Alpha     TensorSpec    `yaml:"alpha,omitempty"`
	// Confidence is a depth model's own per-pixel confidence output
	// (UniDepthV2, Metric3D v2, Depth Anything 3, MoGe, a Marigold
	// ensemble), read into an uncertainty map by ConfidenceSpec.Readout.
	Confidence *ConfidenceSpec `yaml:"confidence,omitempty"`

	// AuxUE records how an AuxUE was built (written by train auxue).
	AuxUE *AuxUEInfo `yaml:"auxue,omitempty"`
}

// InputSpec is the image input (or, for an AuxUE without depth_input, its
// features input). A pixel p in [0,255] becomes
// x = (p * pixel_range/255 - mean[c]) / std[c], in the channel order color.
type InputSpec struct {
	Name     string `yaml:"name"`
	Layout   string `yaml:"layout,omitempty"`   // NCHW (default) or NHWC
	Channels int    `yaml:"channels,omitempty"` // default 3
	Height   int    `yaml:"height"`
	Width    int    `yaml:"width"`
	Color    string `yaml:"color,omitempty"` // rgb (default) or bgr
	// PixelRange is the value of a full-scale pixel before mean/std: 1
	// (pixels in [0,1], the default) or 255.
	PixelRange float32   `yaml:"pixel_range,omitempty"`
	Mean       []float32 `yaml:"mean,omitempty"`
	Std        []float32 `yaml:"std,omitempty"`
	// Resize fits a camera frame of another size: stretch (default) or
	// letterbox. The maps come back at the frame's size either way.
	Resize string `yaml:"resize,omitempty"`
	// Multiple is the multiple that a model with dynamic sides needs of
	// height and width (14 for ViT patches); 0 = none. The spec's sides
	// are checked against it so that a wrong size fails with the key, not
	// inside the model's first Reshape.
	Multiple int `yaml:"multiple,omitempty"`
}

// OutputSpec is the depth output and how to read it: one closed-form map
// of the raw value v per meaning (OutputSpec.Read), with k = scale (0
// means 1; negative flips the sign) and t = shift:
//
//	metric_depth       d = k v + t        (x f_input / canonical_focal when set)
//	disparity,
//	inverse_depth      d = k / (v + t)    (x f_input / canonical_focal when set)
//	sigmoid_disparity  d = k / (1/max_depth + (1/min_depth - 1/max_depth) v)
//	relative           r = k v       (relative inverse depth, larger = nearer)
//
// An empty name takes the model's finest map output (the largest H x W),
// the convention of multi-scale exports.
type OutputSpec struct {
	Name    string  `yaml:"name,omitempty"`
	Meaning string  `yaml:"meaning,omitempty"`
	Scale   float32 `yaml:"scale,omitempty"` // 0 means 1
	// Shift is added to the raw value (disparity, inverse_depth: a
	// disparity offset such as Middlebury's doffs) or to the depth
	// (metric_depth, metres).
	Shift float32 `yaml:"shift,omitempty"`
	// MinDepth and MaxDepth bound a sigmoid_disparity output (metres).
	MinDepth float32 `yaml:"min_depth,omitempty"`
	MaxDepth float32 `yaml:"max_depth,omitempty"`
	// CanonicalFocal makes a metric output camera-dependent: the model
	// predicts the depth a camera of this focal length (pixels, at the
	// model input) would see, and the read-out multiplies it by f_input /
	// canonical_focal, f_input the camera's fx scaled into the input (the
	// camera's intrinsics are then required). Metric3D: metric_depth with
	// 1000; Depth Pro's canonical inverse depth: inverse_depth with the
	// input width (d = f_px / (W c)).
	CanonicalFocal float32 `yaml:"canonical_focal,omitempty"`
}

// TensorSpec names an AuxUE tensor; Units applies to depth_input and scale.
type TensorSpec struct {
	Name  string `yaml:"name"`
	Units string `yaml:"units,omitempty"`
}

// ModelFeatureInput is an AuxUE input (Name) that takes one of the depth
// model's own tensors (Tensor, a node output of its graph, NCHW
// (1,Channels,Height,Width) at the depth model's input size), exposed as
// an extra depth-model output at load time (pkg/onnx.Expose).
type ModelFeatureInput struct {
	Name     string `yaml:"name"`
	Tensor   string `yaml:"tensor"`
	Channels int    `yaml:"channels"`
	Height   int    `yaml:"height"`
	Width    int    `yaml:"width"`
}

// FeatureSpec is an extra model output passed to the AuxUE as features.
type FeatureSpec struct {
	Name string `yaml:"name"`
}

// ErrNoDomainRecord: the AuxUE's spec has no training-domain record (an
// AuxUE trained before records existed, or one written by hand).
var ErrNoDomainRecord = errors.New("the AuxUE's spec has no training-domain record (auxue.domain): retrain it with didoedge train auxue to get one")

// ParseIOSpec decodes a YAML IO spec, rejecting unknown keys, and
// validates it; source names the file in errors.
func ParseIOSpec(data []byte, source string) (IOSpec, error) {
	var s IOSpec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return IOSpec{}, fmt.Errorf("io spec %q: %w", source, err)
	}
	if err := s.Validate(); err != nil {
		return IOSpec{}, fmt.Errorf("io spec %q: %w", source, err)
	}
	return s, nil
}

// ParseIOSpecKind is ParseIOSpec for a file that a context says is of
// kind (a runtime config's auxue key): a spec without kind gets it.
func ParseIOSpecKind(data []byte, source, kind string) (IOSpec, error) {
	var s IOSpec
	// An IO spec is a file named by a key: its errors never quote it.
	if err := yamlstrict.DecodeRedacted(data, &s); err != nil {
		return IOSpec{}, fmt.Errorf("io spec %q: %w", source, err)
	}
	if s.Kind == "" {
		s.Kind = kind
	}
	if s.Kind != kind {
		return IOSpec{}, fmt.Errorf("io spec %q: kind: %q, want %q here", source, s.Kind, kind)
	}
	if err := s.Validate(); err != nil {
		return IOSpec{}, fmt.Errorf("io spec %q: %w", source, err)
	}
	return s, nil
}

// Marshal writes the spec as YAML after a comment line naming what wrote
// it; ParseIOSpec reads the result back to an equal spec.
func (s IOSpec) Marshal(comment string) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("io spec: %w", err)
	}
	var b bytes.Buffer
	for _, line := range strings.Split(strings.TrimSpace(comment), "\n") {
		if line != "" {
			fmt.Fprintf(&b, "# %s\n", line)
		}
	}
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("io spec: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("io spec: %w", err)
	}
	return b.Bytes(), nil
}

// IsAuxUE reports whether the spec describes an AuxUE.
func (s IOSpec) IsAuxUE() bool { return s.Kind == KindAuxUE }

// OwnsInputs reports whether an AuxUE computes its features from the
// image and depth inputs itself (depth_input set).
func (s IOSpec) OwnsInputs() bool { return s.IsAuxUE() && s.DepthInput.Name != "" }

// Relative reports whether a depth model's output is relative (affine
// invariant) inverse depth, or an AuxUE's depth input and scale are.
func (s IOSpec) Relative() bool {
	if s.IsAuxUE() {
		return s.DepthInput.Units == UnitsRelative || s.Scale.Units == UnitsRelative
	}
	return s.Depth.Meaning == MeaningRelative
}

var sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// maxSide bounds every size: a 16384-pixel side is far beyond any camera.
const maxSide = 1 << 14

// Validate checks the spec on its own (not against a model); each error
// names its key.
func (s IOSpec) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch s.Kind {
	case "", KindDepth, KindAuxUE:
	default:
		add("kind: %q is not one of depth, auxue", s.Kind)
	}
	in := s.Input
	features := s.IsAuxUE() && !s.OwnsInputs()
	if in.Name == "" {
		add("input.name: empty")
	}
	switch in.Layout {
	case "", LayoutNCHW:
	case LayoutNHWC:
		if features {
			add("input.layout: an AuxUE features input is NCHW, not %q", in.Layout)
		}
	default:
		add("input.layout: %q is not one of NCHW, NHWC", in.Layout)
	}
	if in.Height <= 0 || in.Width <= 0 || in.Height > maxSide || in.Width > maxSide {
		add("input: height %d and width %d must be in [1, %d]", in.Height, in.Width, maxSide)
	}
	if features {
		if in.Channels < 1 || in.Channels > 4096 {
			add("input.channels: %d, an AuxUE features input needs 1 to 4096", in.Channels)
		}
	} else if in.Channels != 0 && in.Channels != 3 && in.Channels != 1 {
		add("input.channels: %d, an image input has 3 channels (RGB or BGR) or 1 (grey)", in.Channels)
	}
	switch in.Color {
	case "", ColorRGB, ColorBGR:
	default:
		add("input.color: %q is not one of rgb, bgr", in.Color)
	}
	if pr := in.PixelRange; pr != 0 && pr != 1 && pr != 255 {
		add("input.pixel_range: %g is not 1 (pixels in [0,1]) or 255", pr)
	}
	c := s.channels()
	if len(in.Mean) != 0 && len(in.Mean) != c {
		add("input.mean: %d values for %d channels", len(in.Mean), c)
	}
	if len(in.Std) != 0 && len(in.Std) != c {
		add("input.std: %d values for %d channels", len(in.Std), c)
	}
	for i, v := range in.Mean {
		if !finite32(v) {
			add("input.mean[%d]: %g is not finite", i, v)
		}
	}
	for i, v := range in.Std {
		if !(v > 0) || !finite32(v) {
			add("input.std[%d]: %g must be positive and finite", i, v)
		}
	}
	switch in.Resize {
	case "", ResizeStretch, ResizeLetterbox:
	default:
		add("input.resize: %q is not one of stretch, letterbox", in.Resize)
	}
	if m := in.Multiple; m < 0 || m > maxSide {
		add("input.multiple: %d is out of range [0, %d]", m, maxSide)
	} else if m > 1 {
		for _, side := range []struct {
			key string
			n   int
		}{{"height", in.Height}, {"width", in.Width}} {
			if side.n > 0 && side.n%m != 0 {
				lo := side.n / m * m
				add("input.%s: %d is not a multiple of %d (input.multiple); use %d or %d", side.key, side.n, m, max(lo, m), lo+m)
			}
		}
	}
	seen := map[string]string{}
	if in.Name != "" {
		seen[in.Name] = "input"
	}
	name := func(key, n string) {
		if n == "" {
			add("%s.name: empty", key)
			return
		}
		if prev, ok := seen[n]; ok {
			add("%s.name: %q is also %s", key, n, prev)
		}
		seen[n] = key
	}
	if s.IsAuxUE() {
		s.validateAuxUE(name, add)
	} else {
		s.validateDepth(name, add)
	}
	return errors.Join(errs...)
}

func (s IOSpec) validateDepth(name func(key, n string), add func(string, ...any)) {
	if s.Depth.Name != "" {
		// Empty: the model's finest map output, resolved on load.
		name("depth", s.Depth.Name)
	}
	s.Depth.validate(add)
	for i, f := range s.Features {
		name(fmt.Sprintf("features[%d]", i), f.Name)
	}
	for _, t := range []struct {
		key string
		v   TensorSpec
	}{{"depth_input", s.DepthInput}, {"scale", s.Scale}, {"epistemic", s.Epistemic}, {"alpha", s.Alpha}} {
		if t.v != (TensorSpec{}) {
			add("%s: only an AuxUE (kind: auxue) has it; a depth model names depth and features", t.key)
		}
	}
	if s.AuxUE != nil {
		add("auxue: only an AuxUE (kind: auxue) has it")
	}
	if c := s.Confidence; c != nil {
		name("confidence", c.Name)
		c.validate(add)
	}
}

// validate checks the output transform's keys against its meaning.
func (o OutputSpec) validate(add func(string, ...any)) {
	switch o.Meaning {
	case MeaningMetricDepth, MeaningDisparity, MeaningInverseDepth, MeaningRelative, MeaningSigmoidDisparity:
	default:
		add("depth.meaning: %q is not one of metric_depth, disparity, inverse_depth, sigmoid_disparity, relative", o.Meaning)
		return
	}
	for _, v := range []struct {
		key string
		f   float32
	}{{"scale", o.Scale}, {"shift", o.Shift}, {"min_depth", o.MinDepth}, {"max_depth", o.MaxDepth}, {"canonical_focal", o.CanonicalFocal}} {
		if !finite32(v.f) {
			add("depth.%s: %g is not finite", v.key, v.f)
		}
	}
	if o.Shift != 0 && (o.Meaning == MeaningRelative || o.Meaning == MeaningSigmoidDisparity) {
		add("depth.shift: %g: a %s output takes no shift (relative: the alignment finds it per frame; sigmoid_disparity: min_depth and max_depth place it)", o.Shift, o.Meaning)
	}
	if o.Meaning == MeaningSigmoidDisparity {
		if !(o.MinDepth > 0 && o.MaxDepth > o.MinDepth) {
			add("depth.min_depth %g and depth.max_depth %g: sigmoid_disparity needs 0 < min_depth < max_depth (monodepth2: 0.1 and 100)", o.MinDepth, o.MaxDepth)
		}
	} else if o.MinDepth != 0 || o.MaxDepth != 0 {
		add("depth.min_depth, depth.max_depth: only meaning sigmoid_disparity has them, not %s", o.Meaning)
	}
	if o.CanonicalFocal != 0 {
		if o.Meaning == MeaningRelative || o.Meaning == MeaningSigmoidDisparity {
			add("depth.canonical_focal: only meanings metric_depth, disparity and inverse_depth have it, not %s", o.Meaning)
		} else if !(o.CanonicalFocal > 0) {
			add("depth.canonical_focal: %g must be positive (Metric3D: 1000)", o.CanonicalFocal)
		}
	}
	if o.Scale < 0 && o.Meaning == MeaningSigmoidDisparity {
		add("depth.scale: %g: a sigmoid_disparity depth factor must be positive", o.Scale)
	}
	if r := o.Readout(1); !finite32(r.A) || !finite32(r.B) || r.A == 0 {
		add("depth: scale %g, shift %g, min_depth %g, max_depth %g give the read-out constants %g and %g, out of float32's range", o.Scale, o.Shift, o.MinDepth, o.MaxDepth, r.A, r.B)
	}
}

func finite32(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }

func (s IOSpec) channels() int {
	if s.Input.Channels == 0 {
		return 3
	}
	return s.Input.Channels
}

func (s IOSpec) scale() float32 {
	if s.Depth.Scale == 0 {
		return 1
	}
	return s.Depth.Scale
}

// Layout is the input layout, NCHW unless the spec says NHWC.
func (s IOSpec) Layout() string {
	if s.Input.Layout == LayoutNHWC {
		return LayoutNHWC
	}
	return LayoutNCHW
}

// ResizeMode is the input's resize mode, stretch unless it says letterbox.
func (s IOSpec) ResizeMode() string {
	if s.Input.Resize == ResizeLetterbox {
		return ResizeLetterbox
	}
	return ResizeStretch
}

// inputs lists the graph inputs the spec feeds: the image (or features)
// input, then an AuxUE's depth input and its model_features input.
func (s IOSpec) inputNames() []string {
	if s.OwnsInputs() {
		if s.ModelFeatures != nil {
			return []string{s.Input.Name, s.DepthInput.Name, s.ModelFeatures.Name}
		}
		return []string{s.Input.Name, s.DepthInput.Name}
	}
	return []string{s.Input.Name}
}

// outputNames lists the outputs in the order a Session indexes them: the
// depth, the features, then the confidence for a depth model; scale, epistemic, then alpha
// (when named) for an AuxUE.
func (s IOSpec) outputNames() []string {
	if s.IsAuxUE() {
		names := []string{s.Scale.Name, s.Epistemic.Name}
		if s.Alpha.Name != "" {
			names = append(names, s.Alpha.Name)
		}
		return names
	}
	names := []string{s.Depth.Name}
	for _, f := range s.Features {
		names = append(names, f.Name)
	}
	if s.Confidence != nil {
		names = append(names, s.Confidence.Name)
	}
	return names
}

// outputRoles names the role of each output in outputNames order.
func (s IOSpec) outputRoles() []string {
	if s.IsAuxUE() {
		roles := []string{RoleScale, RoleEpistemic}
		if s.Alpha.Name != "" {
			roles = append(roles, RoleAlpha)
		}
		return roles
	}
	roles := []string{RoleDepth}
	for range s.Features {
		roles = append(roles, RoleFeatures)
	}
	if s.Confidence != nil {
		roles = append(roles, RoleConfidence)
	}
	return roles
}

// MapShape reads a map output's shape: (H,W), (1,H,W), (1,1,H,W) or
// (1,H,W,1). Exports write depth as rank 3 (MiDaS, Depth Anything) or
// rank 4 (NCHW or NHWC); all are one H x W map.
func MapShape(shape []int64) (h, w int, err error) {
	bad := fmt.Errorf("shape %v is not one map: want (H,W), (1,H,W), (1,1,H,W) or (1,H,W,1)", shape)
	switch len(shape) {
	case 2:
		h, w = int(shape[0]), int(shape[1])
	case 3:
		if shape[0] != 1 {
			return 0, 0, bad
		}
		h, w = int(shape[1]), int(shape[2])
	case 4:
		switch {
		case shape[0] != 1:
			return 0, 0, bad
		case shape[1] == 1:
			h, w = int(shape[2]), int(shape[3])
		case shape[3] == 1:
			h, w = int(shape[1]), int(shape[2])
		default:
			return 0, 0, bad
		}
	default:
		return 0, 0, bad
	}
	if h < 1 || w < 1 {
		return 0, 0, bad
	}
	return h, w, nil
}
