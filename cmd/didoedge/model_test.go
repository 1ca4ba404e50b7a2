package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

func modelTestEnv() (*cliEnv, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &cliEnv{stdout: &out, stderr: &errb, log: slog.New(slog.NewTextHandler(io.Discard, nil))}, &out, &errb
}

// twoStage is x -> Relu -> Exp -> y with builder-assigned tensor names.
func twoStage(t *testing.T) string {
	t.Helper()
	b := onnx.NewBuilder("two")
	x := b.Input("x", 1, 3)
	h := b.Op("Relu", []string{x})
	y := b.Op("Exp", []string{h})
	b.Rename(y, "y")
	b.OutputShaped("y", 1, 3)
	p := filepath.Join(t.TempDir(), "two.onnx")
	if err := onnx.WriteFile(p, b.Model()); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestModelInspect(t *testing.T) {
	p := twoStage(t)
	env, out, errb := modelTestEnv()
	if code := run(context.Background(), env, []string{"model", "inspect", p}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	for _, want := range []string{"ir_version: 8", "opset:      ai.onnx 17", "  x float (1,3)", "  y float (1,3)", "nodes:      2 (Exp:1 Relu:1)", "sha256:     "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
}

func TestModelExpose(t *testing.T) {
	p := twoStage(t)
	dst := filepath.Join(t.TempDir(), "exposed.onnx")
	env, _, errb := modelTestEnv()
	if code := run(context.Background(), env, []string{"model", "expose", p, "--tensor", "relu_1", "--out", dst}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	e, err := onnxrt.NewEvaluator(mustRead(t, dst), "", "x", []string{"y", "relu_1"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	outs, _, err := e.Run([]int64{1, 3}, []float32{-1, 0, 2})
	if err != nil {
		t.Fatal(err)
	}
	if h := outs[1]; h[0] != 0 || h[1] != 0 || h[2] != 2 {
		t.Fatalf("exposed relu_1 = %v, want [0 0 2]", h)
	}

	env, _, errb = modelTestEnv()
	if code := run(context.Background(), env, []string{"model", "expose", p, "--tensor", "relu", "--out", dst}); code != 1 ||
		!strings.Contains(errb.String(), "candidates: relu_1, y") {
		t.Fatalf("unknown tensor: exit %d, stderr %s", code, errb)
	}
	env, _, errb = modelTestEnv()
	if code := run(context.Background(), env, []string{"model", "expose", p, "--out", dst}); code != 1 || !strings.Contains(errb.String(), "--tensor NAME") {
		t.Fatalf("missing --tensor: exit %d, stderr %s", code, errb)
	}
	env, _, errb = modelTestEnv()
	if code := run(context.Background(), env, []string{"model", "inspect", filepath.Join(t.TempDir(), "none.onnx")}); code != 1 || !strings.Contains(errb.String(), "none.onnx") {
		t.Fatalf("missing file: exit %d, stderr %s", code, errb)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	m, err := onnx.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return m.Marshal()
}

// TestModelBatch: `model batch` writes a copy that runs a batch of 2 in
// ONNX Runtime (y = exp(relu(x)) row by row, a closed form), while the
// original refuses it; bad invocations name what is missing.
func TestModelBatch(t *testing.T) {
	p := twoStage(t)
	dst := filepath.Join(t.TempDir(), "batched.onnx")
	env, _, errb := modelTestEnv()
	if code := run(context.Background(), env, []string{"model", "batch", p, "--out", dst}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	x := []float32{-1, 0, 2, 1, -3, 0.5}
	for _, c := range []struct {
		path string
		ok   bool
	}{{dst, true}, {p, false}} {
		e, err := onnxrt.NewEvaluator(mustRead(t, c.path), "", "x", []string{"y"})
		if err != nil {
			t.Fatal(err)
		}
		outs, _, err := e.Run([]int64{2, 3}, x)
		e.Close()
		if !c.ok {
			if err == nil {
				t.Fatal("the fixed-batch original ran a batch of 2")
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range x {
			if want := float32(math.Exp(float64(max(v, 0)))); math.Abs(float64(outs[0][i]-want)) > 1e-6 {
				t.Fatalf("y[%d] = %g, want %g", i, outs[0][i], want)
			}
		}
	}
	env, _, errb = modelTestEnv()
	if code := run(context.Background(), env, []string{"model", "batch", p}); code != 1 || !strings.Contains(errb.String(), "--out FILE2") {
		t.Fatalf("missing --out: exit %d, stderr %s", code, errb)
	}
	env, _, errb = modelTestEnv()
	if code := run(context.Background(), env, []string{"model", "batch", p, "--out", p}); code != 1 || !strings.Contains(errb.String(), "overwrite") {
		t.Fatalf("--out over the input: exit %d, stderr %s", code, errb)
	}
}
