package nn

import (
	"math"
	"math/rand/v2"
)

// KaimingBound is the half-width of the Kaiming (He) uniform initializer for a
// ReLU network: U(-b, b) with b = sqrt(6 / fanIn) has variance 2 / fanIn.
func KaimingBound(fanIn int) float64 {
	return math.Sqrt(6 / float64(max(fanIn, 1)))
}

// kaimingUniform fills w with U(-b, b), b = KaimingBound(fanIn), drawn from rng.
func kaimingUniform(w []float32, fanIn int, rng *rand.Rand) {
	b := KaimingBound(fanIn)
	for i := range w {
		w[i] = float32((2*rng.Float64() - 1) * b)
	}
}

func newParam(name string, shape ...int) *Param {
	return &Param{Name: name, Value: NewDense(shape...), Grad: NewDense(shape...)}
}

// orDefault returns rng, or a fixed-seed generator when rng is nil, so that
// construction stays deterministic either way.
func orDefault(rng *rand.Rand) *rand.Rand {
	if rng == nil {
		return rand.New(rand.NewPCG(1, 2))
	}
	return rng
}
