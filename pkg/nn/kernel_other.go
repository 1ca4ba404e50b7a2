//go:build !amd64 && !arm64

package nn

// haveKernel is false where no assembly kernel exists: the Go kernels run.
const haveKernel = false

const kernelArch = "portable Go"

const haveWide = false

func kernelTile48(k int, a, b *float32, offs *int, c *float32, ldc int, acc int) {}

func kernelDot6Runs(n8, run8 int, a0, a1, a2, a3, b0, b1, b2, b3, b4, b5, out *float32) {}

func kernelTile(k int, a, b *float32, offs *int, c *float32, ldc int, acc int) {}

func kernelDot(n8 int, a0, a1, a2, a3, b0, b1, b2, out *float32) {}

// haveElementwise: no element-wise kernels here (the Go loops run).
const haveElementwise = false

func kernelReLU(dst, src *float32, n int) {}

func kernelLerp(out, top, bot *float32, a float32, n int) {}

func kernelWiden2(h, sr *float32, n int) {}

func kernelDeinterleave2(even, odd, src *float32, n int) {}
