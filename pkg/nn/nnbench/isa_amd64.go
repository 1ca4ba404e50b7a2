package nnbench

import "golang.org/x/sys/cpu"

// isaName lists the x86 vector extensions the CPU reports: the kernels use
// AVX2 and FMA, and AVX-512 for the convolutions' tile kernel where present.
func isaName() string {
	s := "SSE4.2"
	if cpu.X86.HasAVX2 {
		s = "AVX2"
	}
	if cpu.X86.HasFMA {
		s += "+FMA"
	}
	if cpu.X86.HasAVX512F {
		s += ", AVX-512"
	} else {
		s += ", no AVX-512"
	}
	return s
}
