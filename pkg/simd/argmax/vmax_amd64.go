package argmax

import "golang.org/x/sys/cpu"

// haveArgmaxKernel reports whether updateArgmaxBlocks can run here (AVX2).
var haveArgmaxKernel = cpu.X86.HasAVX2

// updateArgmaxBlocks is UpdateArgmax on the n values at top, cls and z,
// n a positive multiple of 8 (vmax_amd64.s).
//
//go:noescape
func updateArgmaxBlocks(top *float32, cls *int32, z *float32, n int, c int32)
