// Package infer runs ONNX models through ONNX Runtime for the streaming
// pipeline: it finds and checks the runtime library, owns the process's one
// ONNX Runtime environment, picks execution providers in configured order
// (TensorRT, CUDA, CPU) with a logged fallback, checks a model against its IO
// spec, and runs it on tensors allocated once per session so that the
// per-frame path allocates nothing.
//
// The ONNX Runtime environment is the project's one process-wide global: ONNX
// Runtime allows a single OrtEnv per process and the Go binding keeps it in
// package state. Sessions take a reference on it when created and drop it on
// Close; the last Close destroys it.
package infer
