package auxue

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/pkg/nn"
	"gorgonia.org/tensor"
)

// TestAleatoricInputs: with AleatoricInputs A the Laplace head is a
// function of the first A input channels alone, before and after Adam
// steps (its weights on the others stay exactly zero), while the DIDO head
// still reads every channel.
func TestAleatoricInputs(t *testing.T) {
	const N, C, A, H, W = 2, 6, 4, 8, 8
	m, err := NewModel(Config{Form: FormDense, In: C, EncoderWidth: 4, Hidden: 4, K: 4, Lambda: 0.01, AleatoricInputs: A, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	x := nn.NewDense(N, C, H, W)
	for i := range nn.Data(x) {
		nn.Data(x)[i] = float32(rng.NormFloat64())
	}
	g := H * W
	errs, bins := make([]float32, N*g), make([]int32, N*g)
	for i := range errs {
		errs[i] = float32(rng.ExpFloat64())
		bins[i] = int32(rng.IntN(4))
	}
	params := make([]*nn.Param, 0)
	for _, p := range m.Params() {
		params = append(params, p.Param)
	}
	opt := nn.NewAdam(params, nn.AdamConfig{})
	for step := 0; step < 3; step++ {
		nn.ZeroGrad(params)
		if _, err := m.Step(x, errs, nil, bins); err != nil {
			t.Fatal(err)
		}
		if err := opt.Step(1e-2); err != nil {
			t.Fatal(err)
		}
	}
	forward := func(x *tensor.Dense) (raw, logits []float32) {
		r, l, err := m.Forward(x, nn.Eval)
		if err != nil {
			t.Fatal(err)
		}
		return append([]float32(nil), nn.Data(r)...), append([]float32(nil), nn.Data(l)...)
	}
	raw0, log0 := forward(x)
	// Move the channels from A on only.
	y := nn.NewDense(N, C, H, W)
	copy(nn.Data(y), nn.Data(x))
	for n := 0; n < N; n++ {
		for c := A; c < C; c++ {
			for k := 0; k < g; k++ {
				nn.Data(y)[(n*C+c)*g+k] += 3
			}
		}
	}
	raw1, log1 := forward(y)
	for i := range raw0 {
		if raw0[i] != raw1[i] {
			t.Fatalf("Laplace output %d moved from %v to %v with channels %d.. only", i, raw0[i], raw1[i], A)
		}
	}
	moved := false
	for i := range log0 {
		moved = moved || log0[i] != log1[i]
	}
	if !moved {
		t.Fatal("the DIDO head does not read the channels after the aleatoric inputs")
	}
	if _, err := NewModel(Config{Form: FormDense, In: C, EncoderWidth: 4, Hidden: 4, K: 4, AleatoricInputs: A, SharedEncoder: true}); err == nil ||
		!strings.Contains(err.Error(), "separate") {
		t.Fatalf("shared encoder with aleatoric inputs: %v", err)
	}
}
