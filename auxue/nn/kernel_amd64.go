package nn

import "golang.org/x/sys/cpu"

// haveKernel reports whether the AVX2+FMA micro-kernel can run here.
var haveKernel = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// kernel6x16 adds the product of a packed 6×k A panel and a packed k×16 B
// panel into the 6×16 block of C at c (row stride ldc elements). The caller
// guarantees the panels hold k steps and that c has 6 rows of 16 values.
//
//go:noescape
func kernel6x16(k int, a, b, c *float32, ldc int)
