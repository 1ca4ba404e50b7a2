package nnbench

// haveFMA: NEON (Advanced SIMD) is part of every arm64 CPU.
const haveFMA = true

// flopsPerIter is the work of one fmaLoop iteration: 24 independent 4-wide
// FMLAs (2 flops per lane).
const flopsPerIter = 24 * 4 * 2

// fmaLoop runs n iterations of flopsPerIter flops of register-only FMLAs.
//
//go:noescape
func fmaLoop(n int)
