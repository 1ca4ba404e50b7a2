package infer

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"

	"gopkg.in/yaml.v3"
)

// Config selects the runtime library and execution providers.
//
//	library: /opt/ort/libonnxruntime.so.1   # optional, see ResolveLibrary
//	intra_op_threads: 2                     # 0 = ONNX Runtime's default
//	providers:
//	  - {name: tensorrt, device_id: 0, fp16: true, engine_cache_dir: /var/cache/didoedge/trt, workspace_bytes: 1073741824}
//	  - {name: cuda, device_id: 0}
//	  - {name: cpu}
type Config struct {
	Library        string           `yaml:"library"`
	IntraOpThreads int              `yaml:"intra_op_threads"`
	Providers      []ProviderConfig `yaml:"providers"`
}

// Provider names.
const (
	ProviderTensorRT = "tensorrt"
	ProviderCUDA     = "cuda"
	ProviderCPU      = "cpu"
)

// ProviderConfig is one execution provider and its options.
type ProviderConfig struct {
	Name string `yaml:"name"` // tensorrt, cuda or cpu
	// DeviceID is the GPU index (tensorrt, cuda).
	DeviceID int `yaml:"device_id"`
	// FP16 lets TensorRT build half-precision engines (tensorrt only).
	FP16 bool `yaml:"fp16"`
	// EngineCacheDir keeps built TensorRT engines; each model gets a
	// sub-directory keyed by its sha256, the precision and the input shape.
	EngineCacheDir string `yaml:"engine_cache_dir"`
	// WorkspaceBytes caps TensorRT's builder workspace (0 = its default).
	WorkspaceBytes int64 `yaml:"workspace_bytes"`
}

// Validate checks the provider list; an empty list means [cpu].
func (c Config) Validate() error {
	if c.IntraOpThreads < 0 {
		return fmt.Errorf("intra_op_threads: %d is negative", c.IntraOpThreads)
	}
	seen := map[string]bool{}
	for i, p := range c.Providers {
		switch p.Name {
		case ProviderTensorRT, ProviderCUDA, ProviderCPU:
		default:
			return fmt.Errorf("providers[%d].name: %q is not one of tensorrt, cuda, cpu", i, p.Name)
		}
		if seen[p.Name] {
			return fmt.Errorf("providers[%d].name: %q listed twice", i, p.Name)
		}
		seen[p.Name] = true
		if p.DeviceID < 0 {
			return fmt.Errorf("providers[%d].device_id: %d is negative", i, p.DeviceID)
		}
		if p.WorkspaceBytes < 0 {
			return fmt.Errorf("providers[%d].workspace_bytes: %d is negative", i, p.WorkspaceBytes)
		}
		if p.Name != ProviderTensorRT && (p.FP16 || p.EngineCacheDir != "" || p.WorkspaceBytes != 0) {
			return fmt.Errorf("providers[%d]: fp16, engine_cache_dir and workspace_bytes apply to tensorrt only, not %s", i, p.Name)
		}
	}
	return nil
}

func (c Config) providers() []ProviderConfig {
	if len(c.Providers) == 0 {
		return []ProviderConfig{{Name: ProviderCPU}}
	}
	return c.Providers
}

// Depth output meanings.
const (
	MeaningMetricDepth  = "metric_depth"  // depth in metres = value * scale
	MeaningDisparity    = "disparity"     // depth = scale / value (scale = focal * baseline)
	MeaningInverseDepth = "inverse_depth" // depth = scale / value
)

// IOSpec describes how to feed a model and read its outputs. The runtime
// configuration embeds it under its model key.
//
//	input:  {name: image, layout: NCHW, channels: 3, height: 192, width: 640,
//	         mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}
//	depth:  {name: depth, meaning: metric_depth, scale: 1}
//	features: [{name: enc4}]   # extra outputs the AuxUE consumes
type IOSpec struct {
	Input    InputSpec     `yaml:"input"`
	Depth    OutputSpec    `yaml:"depth"`
	Features []FeatureSpec `yaml:"features"`
}

// InputSpec is the image input. Mean and Std apply to pixel values scaled to
// [0,1]: x = (p/255 - mean[c]) / std[c].
type InputSpec struct {
	Name     string    `yaml:"name"`
	Layout   string    `yaml:"layout"` // NCHW (the only layout supported)
	Channels int       `yaml:"channels"`
	Height   int       `yaml:"height"`
	Width    int       `yaml:"width"`
	Mean     []float32 `yaml:"mean"`
	Std      []float32 `yaml:"std"`
}

// OutputSpec is the depth output and how to turn it into metres.
type OutputSpec struct {
	Name    string  `yaml:"name"`
	Meaning string  `yaml:"meaning"`
	Scale   float32 `yaml:"scale"` // 0 means 1
}

// FeatureSpec is an extra model output passed to the AuxUE as features.
type FeatureSpec struct {
	Name string `yaml:"name"`
}

// ParseIOSpec decodes a YAML IO spec, rejecting unknown keys; source names
// the file in errors.
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

// Validate checks the spec on its own (not against a model); errors name
// the key.
func (s IOSpec) Validate() error {
	in := s.Input
	var errs []error
	if in.Name == "" {
		errs = append(errs, errors.New("input.name: empty"))
	}
	if in.Layout != "" && !strings.EqualFold(in.Layout, "NCHW") {
		errs = append(errs, fmt.Errorf("input.layout: %q is not supported (only NCHW)", in.Layout))
	}
	if in.Channels < 0 || in.Height <= 0 || in.Width <= 0 {
		errs = append(errs, fmt.Errorf("input: channels %d, height %d, width %d must be positive", in.Channels, in.Height, in.Width))
	}
	c := s.channels()
	if len(in.Mean) != 0 && len(in.Mean) != c {
		errs = append(errs, fmt.Errorf("input.mean: %d values for %d channels", len(in.Mean), c))
	}
	if len(in.Std) != 0 && len(in.Std) != c {
		errs = append(errs, fmt.Errorf("input.std: %d values for %d channels", len(in.Std), c))
	}
	for i, v := range in.Std {
		if !(v > 0) || math.IsInf(float64(v), 0) {
			errs = append(errs, fmt.Errorf("input.std[%d]: %g must be positive and finite", i, v))
		}
	}
	if s.Depth.Name == "" {
		errs = append(errs, errors.New("depth.name: empty"))
	}
	switch s.Depth.Meaning {
	case MeaningMetricDepth, MeaningDisparity, MeaningInverseDepth:
	default:
		errs = append(errs, fmt.Errorf("depth.meaning: %q is not one of metric_depth, disparity, inverse_depth", s.Depth.Meaning))
	}
	if s.Depth.Scale < 0 || math.IsNaN(float64(s.Depth.Scale)) || math.IsInf(float64(s.Depth.Scale), 0) {
		errs = append(errs, fmt.Errorf("depth.scale: %g must be positive and finite (0 means 1)", s.Depth.Scale))
	}
	seen := map[string]bool{s.Depth.Name: true}
	for i, f := range s.Features {
		if f.Name == "" {
			errs = append(errs, fmt.Errorf("features[%d].name: empty", i))
		} else if seen[f.Name] {
			errs = append(errs, fmt.Errorf("features[%d].name: %q is listed twice", i, f.Name))
		}
		seen[f.Name] = true
	}
	return errors.Join(errs...)
}

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

// outputNames lists the depth output first, then the features.
func (s IOSpec) outputNames() []string {
	names := []string{s.Depth.Name}
	for _, f := range s.Features {
		names = append(names, f.Name)
	}
	return names
}
