package nn

import (
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/didoedge/didoedge/pkg/nn/gradcheck"
)

func testRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 7)) }

// randDense returns a tensor with entries uniform in [lo, hi).
func randDense(rng *rand.Rand, lo, hi float32, shape ...int) *tensor.Dense {
	t := NewDense(shape...)
	for i := range Data(t) {
		Data(t)[i] = lo + (hi-lo)*rng.Float32()
	}
	return t
}

// checkLayerGrads verifies dLoss/dx and every parameter gradient of layer for
// the loss L = Σ r ⊙ layer(x) with fixed random weights r, against central
// differences. prepare, when non-nil, runs before every Forward (to reseed
// stochastic layers).
func checkLayerGrads(t *testing.T, layer Layer, x *tensor.Dense, eps float64, tol gradcheck.Tolerance, prepare func()) {
	t.Helper()
	if prepare != nil {
		prepare()
	}
	y, err := layer.Forward(x, Train)
	if err != nil {
		t.Fatalf("forward: %v", err)
	}
	rng := testRNG(99)
	r := randDense(rng, -1, 1, y.Shape()...)
	rs := Data(r)
	loss := func() float64 {
		if prepare != nil {
			prepare()
		}
		out, err := layer.Forward(x, Train)
		if err != nil {
			t.Fatalf("forward: %v", err)
		}
		var s float64
		for i, v := range Data(out) {
			s += float64(v) * float64(rs[i])
		}
		return s
	}
	loss()
	ZeroGrad(layer.Params())
	dx, err := layer.Backward(r)
	if err != nil {
		t.Fatalf("backward: %v", err)
	}
	// Copy the analytic gradients: the buffers are reused by the probes.
	dxA := append([]float32(nil), Data(dx)...)
	var pA [][]float32
	for _, p := range layer.Params() {
		pA = append(pA, append([]float32(nil), Data(p.Grad)...))
	}
	if err := gradcheck.Check(dxA, gradcheck.NumericGrad(loss, Data(x), eps), tol); err != nil {
		t.Errorf("input gradient: %v", err)
	}
	for i, p := range layer.Params() {
		if err := gradcheck.Check(pA[i], gradcheck.NumericGrad(loss, Data(p.Value), eps), tol); err != nil {
			t.Errorf("parameter %q gradient: %v", p.Name, err)
		}
	}
}

var defaultTol = gradcheck.Tolerance{Rel: 1e-2, Abs: 2e-3}
