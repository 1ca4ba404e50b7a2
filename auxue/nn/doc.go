// Package nn holds small float32 neural-network layers with explicit forward
// and backward passes, optimizers, initializers and checkpoints.
//
// Tensors are gorgonia.org/tensor Dense values of Float32; hot loops work on the
// backing []float32 directly. Image tensors are NCHW, vectors are (N, F).
//
// A Layer caches in Forward what its Backward needs, so Backward must follow the
// Forward whose input it differentiates. Backward accumulates into Param.Grad;
// ZeroGrad clears it between steps.
package nn
