package nn

import "golang.org/x/sys/cpu"

// haveKernel reports whether the AVX2+FMA micro-kernels can run here. The
// kernels use 256-bit registers only: on CPUs with AVX-512 (Zen 4, recent
// Xeons) they run unchanged, and on Zen 4 a 512-bit FMA has the same
// throughput in flops as two 256-bit ones.
var haveKernel = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// haveWide reports whether kernelTile48 (AVX-512 registers) can run; x/sys/cpu
// also checks that the OS saves the 512-bit state.
var haveWide = haveKernel && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL

// kernelArch names the micro-kernels haveKernel selects, for reports.
const kernelArch = "amd64 AVX2+FMA"

// kernelTile is the tile kernel (kernel.go): C[0:4, 0:24] (+)= A·B with B row
// l at b + offs[l] elements; acc = 0 overwrites C. The caller checks bounds.
//
//go:noescape
func kernelTile(k int, a, b *float32, offs *int, c *float32, ldc int, acc int)

// kernelTile48 is the tile kernel on two adjacent panels (C[0:4, 0:48]) in
// AVX-512 registers, with exactly kernelTile's sums.
//
//go:noescape
func kernelTile48(k int, a, b *float32, offs *int, c *float32, ldc int, acc int)

// kernelDot6Runs is two dot kernels sharing the a rows (AVX-512VL's 32 ymm
// registers: sums against b0..b2, then b3..b5) over 8·n8 elements in runs of
// 8·run8, each run's 24 sums, reduced exactly as in kernelDot, added to out
// in turn (see kernel_amd64.s).
//
//go:noescape
func kernelDot6Runs(n8, run8 int, a0, a1, a2, a3, b0, b1, b2, b3, b4, b5, out *float32)

// kernelDot is the dot kernel (kernel.go) over 8·n8 elements.
//
//go:noescape
func kernelDot(n8 int, a0, a1, a2, a3, b0, b1, b2, out *float32)

// haveElementwise reports whether the element-wise kernels (kernelReLU,
// kernelLerp, kernelWiden2, kernelDeinterleave2: AVX2) can run; they come
// with the others.
var haveElementwise = haveKernel

// kernelReLU writes max(src[i], 0) (as Go computes it: ±0 gives +0)
// to dst[i] for i < n, n a multiple of 8.
//
//go:noescape
func kernelReLU(dst, src *float32, n int)

// kernelLerp writes top[j] + a·(bot[j] − top[j]) to out[j] for j < n, n a
// multiple of 8 (Upsample's row blend).
//
//go:noescape
func kernelLerp(out, top, bot *float32, a float32, n int)

// kernelWiden2 writes widen2's columns 1 .. 2n (h from column 1) from
// sr[0 .. n], n a multiple of 8.
//
//go:noescape
func kernelWiden2(h, sr *float32, n int)

// kernelDeinterleave2 writes src[2k] to even[k] and src[2k+1] to odd[k] for
// k < n, n a multiple of 8.
//
//go:noescape
func kernelDeinterleave2(even, odd, src *float32, n int)
