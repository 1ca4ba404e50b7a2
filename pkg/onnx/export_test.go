package onnx_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/internal/onnxtest"
	"github.com/didoedge/didoedge/pkg/nn"
	"github.com/didoedge/didoedge/pkg/onnx"
)

func mustConv(t *testing.T, cfg nn.Conv2dConfig, rng *rand.Rand) *nn.Conv2d {
	t.Helper()
	c, err := nn.NewConv2d(cfg, rng)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// randomize gives every parameter (biases included, which start at zero)
// random values so that parity covers them.
func randomize(l nn.Layer, rng *rand.Rand) {
	for _, p := range l.Params() {
		if p == nil {
			continue
		}
		for i := range nn.Data(p.Value) {
			nn.Data(p.Value)[i] = float32(rng.NormFloat64() * 0.4)
		}
	}
}

// TestExportParity runs each exported network in ONNX Runtime on 20 random
// inputs and compares with the Go forward pass: max |diff| <= 1e-4 max|out|.
// Every exported file also passes onnx.checker with full_check.
func TestExportParity(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name  string
		net   nn.Layer
		shape []int
	}{
		{"mlp", &nn.Sequential{Layers: []nn.Layer{
			nn.NewLinear(6, 16, rng), &nn.ReLU{}, nn.NewDropout(0.3, rng), nn.NewLinear(16, 4, rng), &nn.Softplus{},
		}}, []int{5, 6}},
		{"dido head on vectors", &nn.Sequential{Layers: []nn.Layer{
			nn.NewCosineSimilarity(8, 12, rng), nn.NewLinear(12, 12, rng), &nn.ReLU{}, nn.NewLinear(12, 5, rng), &nn.Exp{Clamp: 1.5},
		}}, []int{4, 8}},
		{"conv head on images", &nn.Sequential{Layers: []nn.Layer{
			mustConv(t, nn.Conv2dConfig{In: 3, Out: 8, Kernel: 3, Padding: 1, Bias: true}, rng), &nn.ReLU{},
			mustConv(t, nn.Conv2dConfig{In: 8, Out: 8, Kernel: 3, Stride: 2, Padding: 1}, rng), &nn.Softplus{},
			nn.NewCosineSimilarity(8, 6, rng),
			mustConv(t, nn.Conv2dConfig{In: 6, Out: 6, Kernel: 1, Bias: true}, rng), &nn.ReLU{},
			mustConv(t, nn.Conv2dConfig{In: 6, Out: 4, Kernel: 3, Padding: 2, Dilation: 2, Bias: true}, rng),
			&nn.Upsample{Factor: 2}, &nn.Exp{},
		}}, []int{2, 3, 12, 16}},
		{"global context into a cosine head", &nn.Sequential{Layers: []nn.Layer{
			mustConv(t, nn.Conv2dConfig{In: 3, Out: 4, Kernel: 3, Padding: 1, Bias: true}, rng), &nn.ReLU{},
			&nn.GlobalContext{}, nn.NewCosineSimilarity(8, 5, rng), &nn.ReLU{},
			mustConv(t, nn.Conv2dConfig{In: 5, Out: 3, Kernel: 1, Bias: true}, rng), &nn.Exp{},
		}}, []int{2, 3, 6, 10}},
		{"banded global context into a cosine head", &nn.Sequential{Layers: []nn.Layer{
			mustConv(t, nn.Conv2dConfig{In: 3, Out: 4, Kernel: 3, Padding: 1, Bias: true}, rng), &nn.ReLU{},
			&nn.GlobalContext{Bands: 3}, nn.NewCosineSimilarity(16, 5, rng), &nn.ReLU{},
			mustConv(t, nn.Conv2dConfig{In: 5, Out: 3, Kernel: 1, Bias: true}, rng), &nn.Exp{},
		}}, []int{2, 3, 6, 10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			randomize(tc.net, rng)
			m, err := onnx.Export(tc.net, onnx.ExportOptions{InputShape: onnxtest.Dims64(tc.shape)})
			if err != nil {
				t.Fatal(err)
			}
			onnxtest.PythonCheck(t, onnxtest.WriteModel(t, m, "net.onnx"))
			worst := 0.0
			defer func() { t.Logf("worst max|ORT-Go|/max|Go| over 20 inputs: %.2g", worst) }()
			for i := range 20 {
				x := onnxtest.RandomInput(rng, tc.shape...)
				want, err := tc.net.Forward(x, nn.Eval)
				if err != nil {
					t.Fatal(err)
				}
				got := onnxtest.Evaluate(t, m, "input", []string{"output"}, onnxtest.Dims64(tc.shape), nn.Data(x))[0]
				if len(got) != len(nn.Data(want)) {
					t.Fatalf("ORT output has %d values, Go %d", len(got), len(nn.Data(want)))
				}
				d := onnxtest.MaxRelDiff(got, nn.Data(want))
				worst = max(worst, d)
				if d > 1e-4 {
					t.Fatalf("input %d: max |ORT - Go| / max|Go| = %.3g > 1e-4", i, d)
				}
			}
		})
	}
}

func TestExportTinyUNetParity(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	u, err := onnx.NewTinyUNet(4, rng)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []nn.Layer{u.Enc1, u.Enc2, u.Enc3, u.Dec2, u.Dec1, u.Head} {
		randomize(l, rng)
	}
	shape := []int{1, 3, 16, 24}
	m, err := u.Export(onnxtest.Dims64(shape))
	if err != nil {
		t.Fatal(err)
	}
	onnxtest.PythonCheck(t, onnxtest.WriteModel(t, m, "unet.onnx"))
	e := onnxtest.NewEvaluator(t, m, "image", []string{"depth", "features"})
	worst := 0.0
	defer func() { t.Logf("worst depth max|ORT-Go|/max|Go| over 20 inputs: %.2g", worst) }()
	for i := range 20 {
		x := onnxtest.RandomInput(rng, shape...)
		depth, feat, err := u.Forward(x)
		if err != nil {
			t.Fatal(err)
		}
		outs, shapes, err := e.Run(onnxtest.Dims64(shape), nn.Data(x))
		if err != nil {
			t.Fatal(err)
		}
		if shapes[0][2] != 16 || shapes[0][3] != 24 || shapes[1][1] != 16 || shapes[1][2] != 4 {
			t.Fatalf("output shapes %v", shapes)
		}
		d := onnxtest.MaxRelDiff(outs[0], nn.Data(depth))
		worst = max(worst, d)
		if d > 1e-4 {
			t.Fatalf("input %d: depth max rel diff %.3g", i, d)
		}
		if d := onnxtest.MaxRelDiff(outs[1], nn.Data(feat)); d > 1e-4 {
			t.Fatalf("input %d: features max rel diff %.3g", i, d)
		}
	}
}

func TestExportErrors(t *testing.T) {
	tests := []struct {
		name  string
		net   nn.Layer
		shape []int64
	}{
		{"linear on images", nn.NewLinear(3, 2, nil), []int64{1, 3, 4, 4}},
		{"upsample on vectors", &nn.Upsample{Factor: 2}, []int64{1, 3}},
		{"global context on vectors", &nn.GlobalContext{}, []int64{1, 3}},
		{"bad input rank", &nn.ReLU{}, []int64{3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := onnx.Export(tc.net, onnx.ExportOptions{InputShape: tc.shape}); err == nil {
				t.Fatal("export succeeded")
			}
		})
	}
	type custom struct{ nn.ReLU }
	_, err := onnx.Export(&custom{}, onnx.ExportOptions{InputShape: []int64{1, 2}})
	if !errors.Is(err, onnx.ErrUnsupported) || !strings.Contains(err.Error(), "custom") {
		t.Fatalf("unsupported layer: err = %v", err)
	}
}
