package onnxexport_test

import (
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"testing"

	"gorgonia.org/tensor"

	"github.com/didoedge/didoedge/pkg/nn"
	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/infer"
)

// pythonCheck runs Debian's python3-onnx checker (full_check: shape
// inference included) on a model file.
func pythonCheck(t *testing.T, path string) {
	t.Helper()
	out, err := exec.Command("/usr/bin/python3", "-c",
		"import onnx,sys; m=onnx.load(sys.argv[1]); onnx.checker.check_model(m, full_check=True)", path).CombinedOutput()
	if err != nil {
		t.Fatalf("onnx.checker rejected %s: %v\n%s", path, err, out)
	}
}

func writeModel(t *testing.T, m *onnx.Model, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := onnx.WriteFile(path, m); err != nil {
		t.Fatal(err)
	}
	return path
}

func newEvaluator(t *testing.T, m *onnx.Model, input string, outputs []string) *infer.Evaluator {
	t.Helper()
	e, err := infer.NewEvaluator(m.Marshal(), "", input, outputs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func randomInput(rng *rand.Rand, shape ...int) *tensor.Dense {
	x := nn.NewDense(shape...)
	for i := range nn.Data(x) {
		nn.Data(x)[i] = float32(rng.NormFloat64())
	}
	return x
}

// dims64 converts a shape to the int64 dims ONNX wants.
func dims64(shape []int) []int64 {
	out := make([]int64, len(shape))
	for i, d := range shape {
		out[i] = int64(d)
	}
	return out
}

// maxRelDiff returns max|a-b| / max|b| (the output's scale).
func maxRelDiff(a, b []float32) float64 {
	var diff, scale float64
	for i := range b {
		diff = max(diff, math.Abs(float64(a[i])-float64(b[i])))
		scale = max(scale, math.Abs(float64(b[i])))
	}
	if scale == 0 {
		return diff
	}
	return diff / scale
}
