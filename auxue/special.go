package auxue

import "math"

// Digamma returns psi(x) = d/dx ln Gamma(x) for x > 0 (NaN for x <= 0 or NaN;
// the heads only ever evaluate it on Dirichlet or NIG parameters, which are
// positive). Small arguments are shifted with psi(x) = psi(x+1) - 1/x until
// x >= 10, where the asymptotic series in 1/x^2 (Bernoulli numbers) is accurate
// to about 1e-15.
func Digamma(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 1) {
		if math.IsInf(x, 1) {
			return math.Inf(1)
		}
		return math.NaN()
	}
	var acc float64
	for x < 10 {
		acc -= 1 / x
		x++
	}
	z := 1 / (x * x)
	// ln x - 1/(2x) - sum B_2n / (2n x^2n)
	series := z * (1.0/12 - z*(1.0/120-z*(1.0/252-z*(1.0/240-z*(1.0/132-z*(691.0/32760))))))
	return acc + math.Log(x) - 0.5/x - series
}

// Trigamma returns psi'(x) for x > 0 (NaN for x <= 0 or NaN), with the shift
// psi'(x) = psi'(x+1) + 1/x^2 up to x >= 10 and the asymptotic series
// 1/x + 1/(2x^2) + sum B_2n / x^(2n+1).
func Trigamma(x float64) float64 {
	if !(x > 0) {
		return math.NaN()
	}
	if math.IsInf(x, 1) {
		return 0
	}
	var acc float64
	for x < 10 {
		acc += 1 / (x * x)
		x++
	}
	z := 1 / (x * x)
	series := z * (1.0/6 - z*(1.0/30-z*(1.0/42-z*(1.0/30-z*(5.0/66-z*(691.0/2730))))))
	return acc + 1/x + 0.5*z + series/x
}

// digammaTrigamma returns Digamma(x) and Trigamma(x) with one pass of the
// shared recurrence: each value is computed by exactly the operations of the
// two functions (the same results), the two loops' divisions overlapping.
func digammaTrigamma(x float64) (psi, tri float64) {
	if !(x > 0) || math.IsInf(x, 1) {
		return Digamma(x), Trigamma(x)
	}
	var accD, accT float64
	for x < 10 {
		accD -= 1 / x
		accT += 1 / (x * x)
		x++
	}
	z := 1 / (x * x)
	seriesD := z * (1.0/12 - z*(1.0/120-z*(1.0/252-z*(1.0/240-z*(1.0/132-z*(691.0/32760))))))
	seriesT := z * (1.0/6 - z*(1.0/30-z*(1.0/42-z*(1.0/30-z*(5.0/66-z*(691.0/2730))))))
	return accD + math.Log(x) - 0.5/x - seriesD, accT + 1/x + 0.5*z + seriesT/x
}

// LogGamma returns ln|Gamma(x)|.
func LogGamma(x float64) float64 {
	v, _ := math.Lgamma(x)
	return v
}
