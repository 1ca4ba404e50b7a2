package nnbench

import "golang.org/x/sys/cpu"

// haveFMA reports whether fmaLoop can run.
var haveFMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// flopsPerIter is the work of one fmaLoop iteration: 12 independent 8-wide
// FMAs (2 flops per lane), enough chains to cover the FMA latency on two
// pipes.
const flopsPerIter = 12 * 8 * 2

// fmaLoop runs n iterations of flopsPerIter flops of register-only FMAs.
//
//go:noescape
func fmaLoop(n int)
