// Package infer is the model layer over the ONNX Runtime binding
// (runtime/infer/onnxrt): a model's IO description (IOSpec: what its
// inputs and outputs mean, their layout and transforms), a session that
// checks a model against its spec, normalizes frames into its input and
// reads its outputs back through the spec's read-outs on tensors allocated
// once (the per-frame path allocates nothing), with provider fallback and
// fault handling, and the depth + AuxUE pair (Models) with batching,
// staging and device-resident tensors between the two. Offline tools run
// a data set's frames, each with its own camera's focal length, through
// InferFrames (both models) or DepthFrames (the depth model alone).
package infer
