//go:build !amd64

package alerts

// haveSpanKernel is false where no assembly kernel exists: the Go loop
// assesses every pixel.
const haveSpanKernel = false

func spanStats(e, d, s, buf *float32, n int, p *spanParams, acc *spanAcc, hist *[histWays][histBins]uint32) int {
	return 0
}

func binKeep(v *float32, n int, from, to float32, lohi *binLoHi) int { return 0 }
