//go:build !amd64

package nn

// haveKernel is false off amd64: gemm uses gonum's kernel there.
const haveKernel = false

func kernel6x16(k int, a, b, c *float32, ldc int) {
	panic("nn: kernel6x16 is amd64 only")
}
