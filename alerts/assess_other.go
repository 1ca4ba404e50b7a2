//go:build !amd64

package alerts

// haveSpanKernel is false where no assembly kernel exists: the Go loop
// assesses every pixel.
const haveSpanKernel = false

func spanStats(e, d, s, buf *float32, n int, p *spanParams, acc *spanAcc) int { return 0 }
