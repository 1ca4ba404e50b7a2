package nonfinite

import "golang.org/x/sys/cpu"

// haveNonFiniteKernel reports whether nonFiniteBlocks can run here (AVX2).
var haveNonFiniteKernel = cpu.X86.HasAVX2

// nonFiniteBlocks counts the NaN and ±Inf among the n values at p, n a
// multiple of 32 below 2^31 (nonfinite_amd64.s).
//
//go:noescape
func nonFiniteBlocks(p *float32, n int) int
