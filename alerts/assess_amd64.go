package alerts

import "golang.org/x/sys/cpu"

// haveSpanKernel reports whether spanStats can run here (AVX2).
var haveSpanKernel = cpu.X86.HasAVX2

// spanStats is the assessment's pixel loop over n pixels (a multiple of
// 8), eight at a time (assess_amd64.s): for blocks whose eight pixels are
// all valid it stores their K/S at buf, counts them into the histogram
// copies (histBin), adds to acc's lanes the pixels with K/S > tau_e and
// with b' > tau_a depth, and lowers acc's lane minima of the depth and of
// the lower end d - b' ln(1/(1-coverage)), with the same float32
// operations as the Go loop. It stops before the first block holding an
// invalid pixel and returns how many pixels it took.
//
//go:noescape
func spanStats(e, d, s, buf *float32, n int, p *spanParams, acc *spanAcc, hist *[histWays][histBins]uint32) int

// binKeep moves the values of v[0:n] (n a multiple of 8) in [from, to)
// to the front of v, in order, and returns how many; it lowers lohi.lo's
// lanes to their minimum and raises lohi.hi's to their maximum
// (assess_amd64.s).
//
//go:noescape
func binKeep(v *float32, n int, from, to float32, lohi *binLoHi) int
