package runconfig

import (
	"errors"
	"fmt"

	"github.com/didoedge/didoedge/internal/boundedfile"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// Batch sizes (pipeline.batch_size): DefaultMaxBatch caps the default
// (min(cameras, DefaultMaxBatch) for dynamic-batch models on a GPU
// provider), MaxBatchSize the key.
const (
	DefaultMaxBatch = 4
	MaxBatchSize    = 16
)

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
	mc.DepthSpecFile, mc.AuxUESpecFile = c.Depth.SpecFile(), c.AuxUE.SpecFile()
	return mc
}

// SpecFile is the file the model's spec came from ("" = inline io).
func (m *ModelConfig) SpecFile() string {
	if m.Description != "" {
		return m.Description
	}
	return m.IOSpec
}

// DefaultBatchSize is what pipeline.batch_size 0 means for the given number
// of cameras: min(cameras, DefaultMaxBatch) frames per run when
// inference.providers names a GPU provider (tensorrt or cuda) and both
// models have a dynamic batch dimension (fixed-batch models run one frame
// per run), and 1 with the CPU provider alone. On a GPU a batch fills the
// device; on the CPU a run's cost grows with its frames, so a batch of 4
// buys 5 to 12 % throughput for the activations of 4 frames held at once
// (ONNX Runtime's arena: 1.69 x the RSS of one camera at 4 cameras against
// 1.26 x one frame per run, docs/runtime.md "Batching"). It is asked for,
// not imposed: a session that falls back from the GPU provider to the CPU
// runs one frame per run (runtime/infer, SessionOptions.IfDynamic).
func (c *Config) DefaultBatchSize(cameras int) int {
	for _, p := range c.Inference.Providers {
		if p.Name == onnxrt.ProviderTensorRT || p.Name == onnxrt.ProviderCUDA {
			return max(1, min(cameras, DefaultMaxBatch))
		}
	}
	return 1
}

// ModelConfig names an ONNX model and its IO spec (runtime/infer.IOSpec,
// the model description `didoedge train depth|auxue` writes beside each
// model), given either inline (io) or as a file (io_spec; description is
// the same key under another name).
type ModelConfig struct {
	Model       string        `yaml:"model"`
	IOSpec      string        `yaml:"io_spec"`
	Description string        `yaml:"description"`
	IO          *infer.IOSpec `yaml:"io"`
}

// AuxUEConfig is the AuxUE model; its spec has kind auxue (the kind may be
// left out here). An AuxUE that owns its input contract (depth_input in
// its spec, what train auxue writes) reads the depth model's image input
// and depth map itself: leave inputs out. For an AuxUE with one features
// input, Inputs lists what is concatenated, channel after channel, into
// it: "image" (the depth model's normalized input), "depth" (the depth
// read-out times depth_scale), or the name of a depth-model feature
// output (`didoedge model expose`).
type AuxUEConfig struct {
	ModelConfig `yaml:",inline"`
	Inputs      []string `yaml:"inputs"`
	DepthScale  float32  `yaml:"depth_scale"` // 0 means 1
}

// Input sources of the AuxUE besides depth-model feature names.
const (
	InputImage = infer.SourceImage
	InputDepth = infer.SourceDepth
)

func checkFile(key, path string) error {
	return boundedfile.Check(key, path, boundedfile.Model)
}

// resolve checks the model file and loads the IO spec (io, io_spec or
// description) into IO; kind is the model kind the key implies.
func (m *ModelConfig) resolve(key, kind string) error {
	var errs []error
	if m.Model == "" {
		errs = append(errs, fmt.Errorf("%s.model: empty", key))
	} else if err := checkFile(key+".model", m.Model); err != nil {
		errs = append(errs, err)
	}
	file, fileKey := m.IOSpec, "io_spec"
	if m.Description != "" {
		file, fileKey = m.Description, "description"
	}
	given := 0
	for _, set := range []bool{m.IOSpec != "", m.Description != "", m.IO != nil} {
		if set {
			given++
		}
	}
	switch {
	case given > 1:
		errs = append(errs, fmt.Errorf("%s: io, io_spec and description are exclusive", key))
	case file != "":
		data, err := boundedfile.Read(key+"."+fileKey, file, boundedfile.Spec)
		if err != nil {
			errs = append(errs, err)
			break
		}
		spec, err := infer.ParseIOSpecKind(data, file, kind)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.%s: %w", key, fileKey, err))
			break
		}
		m.IO = &spec
	case m.IO != nil:
		if m.IO.Kind == "" {
			m.IO.Kind = kind
		}
		if m.IO.Kind != kind {
			errs = append(errs, fmt.Errorf("%s.io.kind: %q, want %q", key, m.IO.Kind, kind))
		} else if err := m.IO.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s.io.%w", key, err))
		}
	default:
		errs = append(errs, fmt.Errorf("%s: give io (inline IO spec), io_spec or description (file)", key))
	}
	return errors.Join(errs...)
}
