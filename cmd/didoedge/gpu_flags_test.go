package main

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/pkg/onnx"
)

// TestTrainDepthUntrained: --untrained exports the seeded network at the
// asked size without training, byte for byte the same on a second run
// (deterministic); its input is (1,3,height,export-width). A height other
// than the training frames' 192 needs --untrained.
func TestTrainDepthUntrained(t *testing.T) {
	dir := t.TempDir()
	export := func(out string) [32]byte {
		env, _, errb := modelTestEnv()
		if code := run(context.Background(), env, []string{"train", "depth", "--untrained", "--height", "64", "--export-width", "96",
			"--width-mult", "2", "--seed", "3", "--out", out, "--checkpoint", filepath.Join(dir, "ckpt"), "--summary", filepath.Join(dir, "s.json")}); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		b, err := os.ReadFile(filepath.Join(out, "depth.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(b)
	}
	a, b := export(filepath.Join(dir, "a")), export(filepath.Join(dir, "b"))
	if a != b {
		t.Fatal("two --untrained exports with the same seed differ")
	}
	m, err := onnx.ReadFile(filepath.Join(dir, "a", "depth.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	in := m.Graph.Inputs[0].Type.Tensor.Shape.Dims
	var dims []int64
	for _, d := range in {
		dims = append(dims, d.Value)
	}
	if len(dims) != 4 || dims[0] != 1 || dims[1] != 3 || dims[2] != 64 || dims[3] != 96 {
		t.Fatalf("input shape %v, want [1 3 64 96]", dims)
	}
	env, _, errb := modelTestEnv()
	if code := run(context.Background(), env, []string{"train", "depth", "--height", "64", "--out", filepath.Join(dir, "c")}); code == 0 ||
		!strings.Contains(errb.String(), "--height 64") || !strings.Contains(errb.String(), "--untrained") {
		t.Fatalf("--height without --untrained: exit %d, %s", code, errb.String())
	}
}
