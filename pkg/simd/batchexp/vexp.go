package batchexp

import "math"

// AddExpPlusOne adds exp(min(z[i], maxz)) + 1 to s[i] for each i below
// min(len(s), len(z)), rounded exactly as the Go expression
//
//	s[i] += math.Exp(min(float64(z[i]), maxz)) + 1
//
// rounds it: e+1 is rounded, then added to s[i]. Each result is
// bit-identical to that expression's, also for ±Inf and NaN in z (NaN
// gives NaN). It allocates nothing.
func AddExpPlusOne(s []float64, z []float32, maxz float64) {
	n := min(len(s), len(z))
	s, z = s[:n], z[:n]
	i := 0
	if haveExpKernel && maxz == maxz { // a NaN maxz (min gives NaN) stays scalar
		for n-i >= blockLen {
			// The kernel stops before the first block of four that
			// holds a value it leaves to math.Exp; that block is done
			// here, and the kernel resumes after it.
			i += addExpPlusOneBlocks(&s[i], &z[i], (n-i)&^(blockLen-1), maxz)
			if n-i >= blockLen {
				addExpPlusOneScalar(s[i:i+blockLen], z[i:i+blockLen], maxz)
				i += blockLen
			}
		}
	}
	addExpPlusOneScalar(s[i:], z[i:], maxz)
}

// blockLen is the number of float64 lanes the kernel evaluates per step.
const blockLen = 4

// addExpPlusOneScalar is the definition, one math.Exp per value.
func addExpPlusOneScalar(s []float64, z []float32, maxz float64) {
	for i, v := range z[:len(s)] {
		s[i] += math.Exp(min(float64(v), maxz)) + 1
	}
}
