package nonfinite

import "unsafe"

// Count counts NaN and ±Inf: values whose float32 exponent bits are all
// ones. With AVX2 a kernel compares 8 values at a time
// (nonfinite_amd64.s); the rest, and CPUs without it, go through
// countWords. On the runtime's outputs of one frame (368,640 values) it
// takes 18 µs against 99 µs word-wise and 306 µs with a compare per
// value (BenchmarkCount, AMD EPYC).
func Count(xs []float32) int {
	n := 0
	if haveNonFiniteKernel && len(xs) >= 32 {
		// AVX2, 8 values per compare: the blocks of 32, then the rest here
		// (chunks below 2^31 values keep the kernel's int32 lanes exact).
		for len(xs) >= 32 {
			k := min(len(xs), 1<<30) &^ 31
			n += nonFiniteBlocks(&xs[0], k)
			xs = xs[k:]
		}
	}
	return n + countWords(xs)
}

// countWords is Count without assembly, two values per uint64 word:
// with b the bits of one value, (b & 0x7f800000) + 0x00800000 reaches
// 0x80000000 exactly when the exponent is all ones, and never carries out
// of its 32-bit half, so bit 31 of each half flags that half's value
// (branch-free; per-half counts are exact below 2^32 values per half).
func countWords(xs []float32) int {
	const (
		expMask = 0x7f8000007f800000
		carry   = 0x0080000000800000
		flags   = 0x8000000080000000
	)
	words := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(xs))), len(xs)/2)
	var acc uint64 // per half: count of flagged values (< 2^32 per half)
	i := 0
	for ; i+4 <= len(words); i += 4 {
		acc += ((words[i]&expMask+carry)&flags)>>31 + ((words[i+1]&expMask+carry)&flags)>>31 +
			((words[i+2]&expMask+carry)&flags)>>31 + ((words[i+3]&expMask+carry)&flags)>>31
	}
	for ; i < len(words); i++ {
		acc += ((words[i]&expMask + carry) & flags) >> 31
	}
	n := int(acc&0xffffffff) + int(acc>>32)
	if len(xs)%2 == 1 {
		if v := xs[len(xs)-1]; v-v != 0 { // v-v is NaN for NaN and ±Inf
			n++
		}
	}
	return n
}
