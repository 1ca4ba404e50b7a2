// Package onnxtest holds the helpers the ONNX writer's tests share
// (pkg/onnx, auxue/onnxexport): Debian's python3-onnx checker as an
// independent oracle, ONNX Runtime as the reference evaluator, and the
// comparisons they make.
package onnxtest

import (
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"testing"

	"gorgonia.org/tensor"

	"github.com/didoedge/didoedge/pkg/nn"
	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// PythonCheck runs Debian's python3-onnx checker (full_check: shape
// inference included) on a model file.
func PythonCheck(t testing.TB, path string) {
	t.Helper()
	out, err := exec.Command("/usr/bin/python3", "-c",
		"import onnx,sys; m=onnx.load(sys.argv[1]); onnx.checker.check_model(m, full_check=True)", path).CombinedOutput()
	if err != nil {
		t.Fatalf("onnx.checker rejected %s: %v\n%s", path, err, out)
	}
}

// WriteModel writes m into the test's temporary directory as name.
func WriteModel(t testing.TB, m *onnx.Model, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := onnx.WriteFile(path, m); err != nil {
		t.Fatal(err)
	}
	return path
}

// NewEvaluator opens m in ONNX Runtime (CPU), closed with the test.
func NewEvaluator(t testing.TB, m *onnx.Model, input string, outputs []string) *onnxrt.Evaluator {
	t.Helper()
	e, err := onnxrt.NewEvaluator(m.Marshal(), "", input, outputs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// Evaluate runs a model once through ONNX Runtime (CPU) and returns its
// outputs.
func Evaluate(t testing.TB, m *onnx.Model, input string, outputs []string, shape []int64, x []float32) [][]float32 {
	t.Helper()
	e, err := onnxrt.NewEvaluator(m.Marshal(), "", input, outputs)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	vals, _, err := e.Run(shape, x)
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

// RandomInput is a tensor of the shape with standard normal entries.
func RandomInput(rng *rand.Rand, shape ...int) *tensor.Dense {
	x := nn.NewDense(shape...)
	for i := range nn.Data(x) {
		nn.Data(x)[i] = float32(rng.NormFloat64())
	}
	return x
}

// Dims64 converts a shape to the int64 dims ONNX wants.
func Dims64(shape []int) []int64 {
	out := make([]int64, len(shape))
	for i, d := range shape {
		out[i] = int64(d)
	}
	return out
}

// MaxRelDiff returns max|a-b| / max|b| (the output's scale); the absolute
// difference when b is all zeros.
func MaxRelDiff(a, b []float32) float64 {
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
