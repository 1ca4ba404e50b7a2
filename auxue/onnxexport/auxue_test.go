package onnxexport_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/didoedge/didoedge/auxue/onnxexport"
	"github.com/didoedge/didoedge/internal/onnxtest"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/pkg/nn"
)

// TestExportAuxUEParity compares the exported AuxUE's outputs in ONNX Runtime
// with the Go model's Forward and Predict read-outs on 20 random inputs each.
func TestExportAuxUEParity(t *testing.T) {
	tests := []struct {
		name  string
		cfg   auxue.Config
		shape []int
	}{
		{"dense laplace shared encoder", auxue.Config{Form: auxue.FormDense, In: 4, EncoderWidth: 6, SharedEncoder: true, Hidden: 5, K: 8, Lambda: 0.01, Seed: 1}, []int{2, 4, 8, 10}},
		{"dense gen-gaussian separate encoders", auxue.Config{Form: auxue.FormDense, In: 4, EncoderWidth: 5, Hidden: 4, K: 6, Seed: 2,
			Aleatoric: auxue.AleatoricLoss{Kind: auxue.GenGaussian}}, []int{1, 4, 6, 6}},
		{"vector gaussian softplus", auxue.Config{Form: auxue.FormVector, In: 7, Hidden: 9, K: 32, Seed: 3,
			Aleatoric: auxue.AleatoricLoss{Kind: auxue.Gaussian, Activation: auxue.ActSoftplus}}, []int{6, 7}},
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := auxue.NewModel(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range m.Params() {
				for i := range nn.Data(p.Value) {
					nn.Data(p.Value)[i] = float32(rng.NormFloat64() * 0.3)
				}
			}
			om, err := onnxexport.ExportAuxUE(m, onnxtest.Dims64(tc.shape))
			if err != nil {
				t.Fatal(err)
			}
			onnxtest.PythonCheck(t, onnxtest.WriteModel(t, om, "auxue.onnx"))
			hasScale := tc.cfg.Aleatoric.Kind != auxue.GenGaussian
			names := []string{onnxexport.OutputAleatoricRaw, onnxexport.OutputAlpha, onnxexport.OutputEpistemic}
			if hasScale {
				names = append(names, onnxexport.OutputScale)
			}
			e := onnxtest.NewEvaluator(t, om, "features", names)
			var pred auxue.Prediction
			for i := range 20 {
				x := onnxtest.RandomInput(rng, tc.shape...)
				raw, logits, err := m.Forward(x, nn.Eval)
				if err != nil {
					t.Fatal(err)
				}
				rawGo := append([]float32(nil), nn.Data(raw)...)
				alphaGo := make([]float32, len(nn.Data(logits)))
				for j, z := range nn.Data(logits) {
					alphaGo[j] = float32(math.Exp(math.Min(float64(z), nn.DefaultExpClamp)) + 1)
				}
				if err := m.Predict(x, 0.9, &pred); err != nil {
					t.Fatal(err)
				}
				outs, _, err := e.Run(onnxtest.Dims64(tc.shape), nn.Data(x))
				if err != nil {
					t.Fatal(err)
				}
				checks := []struct {
					name      string
					got, want []float32
				}{{"raw", outs[0], rawGo}, {"alpha", outs[1], alphaGo}, {"epistemic", outs[2], pred.Epistemic}}
				if hasScale {
					checks = append(checks, struct {
						name      string
						got, want []float32
					}{"scale", outs[3], pred.Scale})
				}
				for _, c := range checks {
					if len(c.got) != len(c.want) {
						t.Fatalf("%s: %d values, want %d", c.name, len(c.got), len(c.want))
					}
					d := onnxtest.MaxRelDiff(c.got, c.want)
					if i == 0 {
						t.Logf("%s: max rel diff %.2g", c.name, d)
					}
					if d > 1e-4 {
						t.Fatalf("input %d %s: max rel diff %.3g", i, c.name, d)
					}
				}
			}
		})
	}
}
