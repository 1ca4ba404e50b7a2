package batchexp

import "golang.org/x/sys/cpu"

// haveExpKernel reports whether addExpPlusOneBlocks can run here. It is
// the condition under which math.Exp takes its FMA path (AVX and FMA;
// the kernel's integer lanes also need AVX2): on a CPU without it
// math.Exp rounds differently (separate multiplies and adds), and only
// math.Exp itself reproduces it.
var haveExpKernel = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// addExpPlusOneBlocks does AddExpPlusOne on the n values at s and z (n a
// multiple of 4), four at a time, and returns how many it did: n, or the
// start of the first block of four with a value whose exp it leaves to
// math.Exp (result not 2^k·y with -1022 <= k <= 1023, or the argument
// above exp's overflow bound, ±Inf or NaN); s is unchanged from there on
// (addexp_amd64.s).
//
//go:noescape
func addExpPlusOneBlocks(s *float64, z *float32, n int, maxz float64) int
