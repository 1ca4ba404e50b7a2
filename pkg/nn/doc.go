// Package nn holds small float32 neural-network layers with explicit forward
// and backward passes, optimizers, initializers and checkpoints.
//
// Tensors are gorgonia.org/tensor Dense values of Float32; hot loops work on the
// backing []float32 directly (see Data). Image tensors are NCHW, vectors are (N, F).
//
// A Layer caches in Forward what its Backward needs, so Backward must follow the
// Forward whose input it differentiates. Backward accumulates into Param.Grad;
// ZeroGrad clears it between steps.
//
// Ownership: a layer returns tensors it owns and reuses them while shapes stay
// the same, so a training step allocates nothing once warm. The output of
// Forward (and of Backward) is valid until the next call on the same layer;
// copy it to keep it (e.g. across MonteCarlo samples). A layer also keeps a
// reference to its input, which must stay unchanged until Backward. One layer
// value is one node of a network: do not use it twice in a Sequential. Layers
// are not safe for concurrent use; Conv2d parallelizes internally.
//
// Layers: Linear, Conv2d (an implicit GEMM on padded phase planes, parallel
// across GOMAXPROCS; AVX2+FMA or NEON micro-kernels, kernel.go),
// CosineSimilarity (the DIDO head's first layer, on vectors or
// per pixel), ReLU, Exp (clamped), Softplus, Upsample (bilinear, half-pixel),
// Dropout (Eval / Train / MonteCarlo), Concat (several inputs) and Sequential.
// Optimizers: Adam and AdamW, with the BTS polynomial learning-rate decay.
// Checkpoints: a versioned, checksummed binary format (see SaveCheckpoint).
// The gradcheck subpackage verifies gradients by central differences.
package nn
