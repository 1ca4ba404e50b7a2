// Package depthnet is the project's reference main model f: a small, fully
// convolutional encoder-decoder that maps a normalized RGB image to positive
// metric depth, trained with a scale-invariant log loss on sparse LiDAR-like
// ground truth only (the sky is never supervised, exactly as in KITTI).
//
// It is not the method (that is package auxue); it exists so that the
// project can train, export and ship a real depth network whose errors the
// AuxUE learns. The package holds the architecture and its ONNX export
// (through pkg/onnx) only; training on the simulated outdoor world lives
// in package offline.
package depthnet
