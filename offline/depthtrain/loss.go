package depthtrain

import (
	"fmt"
	"math"
)

// SILog is the scale-invariant log loss of Eigen et al. (2014) in the form
// BTS uses (Lee et al. 2019): with g_i = log d_i - log y_i over the valid
// pixels of the batch,
//
//	L = sqrt(mean(g^2) - Lambda * mean(g)^2).
//
// Lambda = 1 is fully scale invariant; BTS uses 0.85 so that the absolute
// scale is still learned.
type SILog struct {
	Lambda   float64
	MaxDepth float64 // the network's output bound: d = MaxDepth*sigmoid(z)
}

// LossGrad evaluates the loss of logits z against ground truth gt (metres,
// 0 = no ground truth, never supervised) and writes dL/dz into grad (zero
// where there is no ground truth). It returns the loss and the number of
// supervised pixels; with none, the loss and gradient are 0.
func (s SILog) LossGrad(z, gt, grad []float32) (float64, int, error) {
	if len(gt) != len(z) || len(grad) != len(z) {
		return 0, 0, fmt.Errorf("silog: %d logits, %d targets, %d gradients", len(z), len(gt), len(grad))
	}
	logMax := math.Log(s.MaxDepth)
	var sum, sum2 float64
	n := 0
	for i, y := range gt {
		grad[i] = 0
		if !(y > 0) {
			continue
		}
		g := logMax - softplus(-float64(z[i])) - math.Log(float64(y))
		sum += g
		sum2 += g * g
		n++
	}
	if n == 0 {
		return 0, 0, nil
	}
	mean := sum / float64(n)
	a := sum2/float64(n) - s.Lambda*mean*mean
	l := math.Sqrt(math.Max(a, 0))
	if l < 1e-12 {
		return l, n, nil // at the optimum the gradient of sqrt is undefined: take 0
	}
	for i, y := range gt {
		if !(y > 0) {
			continue
		}
		zi := float64(z[i])
		g := logMax - softplus(-zi) - math.Log(float64(y))
		// dL/dg = (g - Lambda*mean)/(n L); dg/dz = 1 - sigmoid(z) = sigmoid(-z).
		grad[i] = float32((g - s.Lambda*mean) / (float64(n) * l) * sigmoid(-zi))
	}
	return l, n, nil
}

// softplus is log(1 + e^x) without overflow.
func softplus(x float64) float64 {
	if x > 0 {
		return x + math.Log1p(math.Exp(-x))
	}
	return math.Log1p(math.Exp(x))
}

func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}
