package nn

// haveKernel: NEON (Advanced SIMD) is part of every arm64 CPU, the Jetson's
// Cortex-A78AE included.
const haveKernel = true

// kernelArch names the micro-kernels for reports.
const kernelArch = "arm64 NEON"

// haveWide: no double-width tile kernel on arm64 (tile2 runs two tiles).
const haveWide = false

func kernelTile48(k int, a, b *float32, offs *int, c *float32, ldc int, acc int) {}

func kernelDot6Runs(n8, run8 int, a0, a1, a2, a3, b0, b1, b2, b3, b4, b5, out *float32) {}

// kernelTile is the tile kernel (kernel.go) in NEON: 24 FMLAs by element per
// step into 24 accumulators of 4 lanes. The caller checks bounds.
//
//go:noescape
func kernelTile(k int, a, b *float32, offs *int, c *float32, ldc int, acc int)

// kernelDot is the dot kernel (kernel.go) in NEON.
//
//go:noescape
func kernelDot(n8 int, a0, a1, a2, a3, b0, b1, b2, out *float32)

// haveElementwise: no element-wise kernels here (the Go loops run).
const haveElementwise = false

func kernelReLU(dst, src *float32, n int) {}

func kernelLerp(out, top, bot *float32, a float32, n int) {}

func kernelWiden2(h, sr *float32, n int) {}

func kernelDeinterleave2(even, odd, src *float32, n int) {}
