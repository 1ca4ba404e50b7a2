// Package onnxrt is the project's binding to ONNX Runtime below the model
// layer (runtime/infer): it finds and checks the runtime library, owns the
// process's one ONNX Runtime environment and its global thread pools,
// configures execution providers (TensorRT, CUDA, CPU; the GPU provider
// bridge of the 1.29 build through the C API), records where ONNX Runtime
// placed a session's nodes, converts tensors of other element types
// (float16, uint8) to and from float32, gives device memory and I/O binding
// through the OrtApi table (DevAPI), and runs a model by tensor names alone
// (Evaluator). It knows no IO spec, no model meaning and no pipeline.
//
// The ONNX Runtime environment is the project's one process-wide global: ONNX
// Runtime allows a single OrtEnv per process and the Go binding keeps it in
// package state. Sessions take a reference on it when created and drop it on
// Close; the last Close destroys it (EnvironmentRefs).
package onnxrt
