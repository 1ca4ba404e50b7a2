//go:build !amd64

package nonfinite

// haveNonFiniteKernel is false where no assembly kernel exists: the
// word-wise Go loop counts every value.
const haveNonFiniteKernel = false

func nonFiniteBlocks(p *float32, n int) int { return 0 }
