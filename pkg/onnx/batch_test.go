package onnx

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDynamicBatchEdits: the declarations become symbolic, a batch-1
// constant concatenated with the input is expanded, and graphs whose batch
// is fixed by a constant shape are refused naming the node.
func TestDynamicBatchEdits(t *testing.T) {
	build := func(reshape []int64) *Model {
		b := NewBuilder("t")
		x := b.Input("x", 1, 2, 3, 4)
		c := b.Const("plane", []int64{1, 1, 3, 4}, make([]float32, 12))
		cat := b.Op("Concat", []string{x, c}, IntAttr("axis", 1))
		out := cat
		if reshape != nil {
			out = b.Op("Reshape", []string{cat, b.ConstInt64("shape", []int64{int64(len(reshape))}, reshape)})
		}
		b.Rename(out, "y")
		b.OutputShaped("y", 1, 3, 3, 4)
		return b.Model()
	}
	m := build([]int64{0, -1, 3, 4})
	edit, err := DynamicBatch(m, "")
	if err != nil {
		t.Fatal(err)
	}
	if edit.Declarations != 2 || len(edit.Broadcasts) != 1 || !strings.HasPrefix(edit.Broadcasts[0], "plane") {
		t.Fatalf("edit %+v", edit)
	}
	for _, v := range append(m.Graph.Inputs, m.Graph.Outputs...) {
		if d := v.Type.Tensor.Shape.Dims[0]; d.HasValue || d.Param != BatchParam {
			t.Fatalf("%s: dim 0 %+v", v.Name, d)
		}
	}
	ops := map[string]int{}
	for _, n := range m.Graph.Nodes {
		ops[n.OpType]++
	}
	if ops["Shape"] != 1 || ops["Slice"] != 1 || ops["Expand"] != 1 || ops["Concat"] != 2 {
		t.Fatalf("ops %v", ops)
	}
	for _, tc := range []struct {
		name  string
		model *Model
		want  string
	}{
		{"reshape fixes the batch", build([]int64{1, -1, 3, 4}), "Reshape node"},
		{"fixed batch input", func() *Model {
			b := NewBuilder("t")
			b.Rename(b.Op("Relu", []string{b.Input("x", 2, 3)}), "y")
			b.OutputShaped("y", 2, 3)
			return b.Model()
		}(), `input "x" has a fixed batch of 2`},
	} {
		if _, err := DynamicBatch(tc.model, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestDynamicBatchReferenceModels: the reference models of models/ made
// dynamic keep every initializer byte for byte (the weights), gain only
// the batch-following nodes, and pass Debian's python3-onnx checker with
// full shape inference, which reports dim 0 of every input and output as
// the symbolic "N".
func TestDynamicBatchReferenceModels(t *testing.T) {
	for _, name := range []string{"depth.onnx", "auxue.onnx"} {
		path := filepath.Join("..", "..", "models", name)
		orig, err := ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DynamicBatch(m, ""); err != nil {
			t.Fatal(err)
		}
		weights := map[string][]byte{}
		for _, w := range m.Graph.Initializers {
			weights[w.Name] = w.RawData
		}
		for _, w := range orig.Graph.Initializers {
			if got, ok := weights[w.Name]; !ok || !bytes.Equal(got, w.RawData) || len(w.FloatData) > 0 {
				t.Fatalf("%s: initializer %q changed", name, w.Name)
			}
		}
		out := filepath.Join(t.TempDir(), name)
		if err := WriteFile(out, m); err != nil {
			t.Fatal(err)
		}
		got, err := exec.Command("/usr/bin/python3", "-c", `import onnx,sys
m=onnx.load(sys.argv[1]); onnx.checker.check_model(m, full_check=True)
print(" ".join(v.type.tensor_type.shape.dim[0].dim_param or "fixed" for v in list(m.graph.input)+list(m.graph.output)))`, out).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: onnx.checker: %v\n%s", name, err, got)
		}
		for _, d := range strings.Fields(string(got)) {
			if d != BatchParam {
				t.Fatalf("%s: python3-onnx sees batch dims %q", name, got)
			}
		}
	}
}

// FuzzDynamicBatch: any model that decodes (a foreign file handed to
// `didoedge model batch`) is edited or refused with an error, never a
// panic, and an edited model still encodes and decodes.
func FuzzDynamicBatch(f *testing.F) {
	b := NewBuilder("t")
	x := b.Input("x", 1, 2, 3, 4)
	c := b.Const("plane", []int64{1, 1, 3, 4}, make([]float32, 12))
	cat := b.Op("Concat", []string{x, c}, IntAttr("axis", 1))
	b.Rename(cat, "y")
	b.OutputShaped("y", 1, 3, 3, 4)
	seed := b.Model().Marshal()
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte("not onnx"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Unmarshal(data)
		if err != nil {
			return
		}
		if _, err := DynamicBatch(m, ""); err != nil {
			return
		}
		if _, err := Unmarshal(m.Marshal()); err != nil {
			t.Fatalf("edited model does not decode: %v", err)
		}
	})
}
