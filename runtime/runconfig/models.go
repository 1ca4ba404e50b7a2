package runconfig

import (
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
