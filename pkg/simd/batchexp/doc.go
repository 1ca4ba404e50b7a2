// Package vexp evaluates exp over many float32 logits at once, bit for bit
// as math.Exp does one at a time: the DIDO epistemic read-out (K/S with
// S the sum of exp(z)+1 over K classes) runs it on every pixel of every
// evaluated frame, where math.Exp was the largest single cost.
//
// On amd64 with AVX2 and FMA a kernel evaluates four values per
// instruction with exactly the operations (and roundings) that
// math.Exp's own FMA path performs on one value, so each lane's result is
// the same float64; values whose result is not a normal number times a
// power of two in range (underflow, overflow, ±Inf, NaN) go through
// math.Exp itself. Elsewhere every value goes through math.Exp.
package batchexp
