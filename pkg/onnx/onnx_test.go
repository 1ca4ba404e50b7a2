package onnx_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/internal/onnxtest"
	"github.com/didoedge/didoedge/pkg/nn"
	"github.com/didoedge/didoedge/pkg/onnx"
)

// reluDouble is x -> h = Relu(x) -> y = h * 2 with fixed tensor names.
func reluDouble(withValueInfo bool) *onnx.Model {
	m := &onnx.Model{
		IRVersion:    onnx.IRVersion,
		ProducerName: "test",
		OpsetImports: []onnx.OpsetID{{Version: onnx.Opset}},
		Graph: &onnx.Graph{
			Name: "g",
			Nodes: []*onnx.Node{
				{Name: "relu", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"h"}},
				{Name: "mul", OpType: "Mul", Inputs: []string{"h", "two"}, Outputs: []string{"y"}},
			},
			Initializers: []*onnx.Tensor{onnx.FloatTensor("two", nil, []float32{2})},
			Inputs:       []*onnx.ValueInfo{onnx.TensorValueInfo("x", onnx.DataTypeFloat, []int64{-1, 4})},
			Outputs:      []*onnx.ValueInfo{onnx.TensorValueInfo("y", onnx.DataTypeFloat, []int64{-1, 4})},
		},
	}
	if withValueInfo {
		m.Graph.ValueInfo = []*onnx.ValueInfo{onnx.TensorValueInfo("h", onnx.DataTypeFloat, []int64{-1, 4})}
	}
	return m
}

func TestRoundTripIsStable(t *testing.T) {
	b1 := reluDouble(true).Marshal()
	m, err := onnx.Unmarshal(b1)
	if err != nil {
		t.Fatal(err)
	}
	if b2 := m.Marshal(); !bytes.Equal(b1, b2) {
		t.Fatalf("re-encoding changed the bytes: %d vs %d", len(b1), len(b2))
	}
	if got := m.Graph.Nodes[1].Inputs; len(got) != 2 || got[1] != "two" {
		t.Fatalf("node inputs = %v", got)
	}
	vals, err := m.Graph.Initializers[0].Floats()
	if err != nil || len(vals) != 1 || vals[0] != 2 {
		t.Fatalf("initializer = %v, %v", vals, err)
	}
}

// TestPreservesUnknownFields has python write a model with fields the codec
// does not model (a graph-valued If attribute, metadata, a sequence-typed
// value_info, a sparse initializer, node doc strings), re-encodes it in Go,
// and has python compare both messages.
func TestPreservesUnknownFields(t *testing.T) {
	dir := t.TempDir()
	orig, back := filepath.Join(dir, "orig.onnx"), filepath.Join(dir, "back.onnx")
	script := `
import onnx, sys
from onnx import helper, TensorProto
then_g = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
cond = helper.make_node("Greater", ["a", "b"], ["c"], doc_string="compare")
iff = helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)
sp = helper.make_sparse_tensor(helper.make_tensor("v", TensorProto.FLOAT, [1], [5.0]), helper.make_tensor("i", TensorProto.INT64, [1], [0]), [3])
g = helper.make_graph([cond, iff], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("a", TensorProto.FLOAT, []), helper.make_tensor_value_info("b", TensorProto.FLOAT, [])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    value_info=[helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)],
    sparse_initializer=[sp])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="py")
m.ir_version = 8
helper.set_model_props(m, {"author": "test", "k": "v"})
onnx.save(m, sys.argv[1])
`
	if out, err := exec.Command("/usr/bin/python3", "-c", script, orig).CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	m, err := onnx.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Graph.Nodes) != 2 || m.Graph.Nodes[1].OpType != "If" || len(m.MetadataProps) != 2 {
		t.Fatalf("decoded %d nodes, metadata %v", len(m.Graph.Nodes), m.MetadataProps)
	}
	if err := onnx.WriteFile(back, m); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/usr/bin/python3", "-c",
		"import onnx,sys; a=onnx.load(sys.argv[1]); b=onnx.load(sys.argv[2]); print(a==b)", orig, back).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "True" {
		t.Fatalf("python says the re-encoded model differs: %v %s", err, out)
	}
}

func TestUnmarshalRejectsGarbage(t *testing.T) {
	valid := reluDouble(false).Marshal()
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "no graph"},
		{"text", []byte("hello, this is not a model"), "ModelProto"},
		{"truncated", valid[:len(valid)-3], "ModelProto field 8"},
		{"bad varint", []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "ModelProto"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := onnx.Unmarshal(tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "broken.onnx")
	os.WriteFile(path, []byte("garbage"), 0o644)
	if _, err := onnx.ReadFile(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("ReadFile error %v does not name the file", err)
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add(reluDouble(true).Marshal())
	f.Add(reluDouble(false).Marshal()[:20])
	f.Add([]byte{0x3a, 0x02, 0x0a, 0x00})
	f.Add([]byte("not onnx"))
	m, _ := onnx.Export(&nn.Sequential{Layers: []nn.Layer{nn.NewLinear(3, 2, nil), &nn.ReLU{}}}, onnx.ExportOptions{InputShape: []int64{1, 3}})
	f.Add(m.Marshal())
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := onnx.Unmarshal(data)
		if err != nil {
			return
		}
		b1 := m.Marshal()
		m2, err := onnx.Unmarshal(b1)
		if err != nil {
			t.Fatalf("re-encoded model does not decode: %v", err)
		}
		if b2 := m2.Marshal(); !bytes.Equal(b1, b2) {
			t.Fatalf("encoding is not a fixed point after one round trip")
		}
		_ = onnx.Candidates(m, "x", 3)
	})
}

func TestInspect(t *testing.T) {
	path := onnxtest.WriteModel(t, reluDouble(false), "m.onnx")
	s, err := onnx.Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	sum := sha256.Sum256(data)
	if s.SHA256 != hex.EncodeToString(sum[:]) || s.IRVersion != 8 || s.Nodes != 2 || s.Opsets[0].Version != 17 {
		t.Fatalf("summary %+v", s)
	}
	var buf bytes.Buffer
	if err := s.Write(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"x float (N,4)", "y float (N,4)", "opset:      ai.onnx 17", "nodes:      2 (Mul:1 Relu:1)"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("inspect output lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestExposeMatchesDirectOutput(t *testing.T) {
	for _, withVI := range []bool{false, true} {
		m := reluDouble(withVI)
		if err := onnx.Expose(m, "h"); err != nil {
			t.Fatal(err)
		}
		got := m.Graph.Outputs[1]
		if wantShape := map[bool]string{false: "(?,?)", true: "(N,4)"}[withVI]; got.Type.Tensor.Shape.String() != wantShape {
			t.Errorf("value_info %v: exposed shape %s, want %s", withVI, got.Type.Tensor.Shape, wantShape)
		}
		onnxtest.PythonCheck(t, onnxtest.WriteModel(t, m, "exposed.onnx"))

		direct := reluDouble(false)
		direct.Graph.Outputs = []*onnx.ValueInfo{onnx.TensorValueInfo("h", onnx.DataTypeFloat, []int64{-1, 4})}

		x := []float32{-1, 2, -3, 4, 0.5, -0.5, 7, -8}
		outs := onnxtest.Evaluate(t, m, "x", []string{"y", "h"}, []int64{2, 4}, x)
		want := onnxtest.Evaluate(t, direct, "x", []string{"h"}, []int64{2, 4}, x)
		for i := range x {
			if outs[1][i] != want[0][i] || outs[0][i] != 2*want[0][i] || want[0][i] != max(x[i], 0) {
				t.Fatalf("element %d: exposed h %g, direct h %g, y %g, x %g", i, outs[1][i], want[0][i], outs[0][i], x[i])
			}
		}
	}
}

func TestExposeErrors(t *testing.T) {
	m := reluDouble(false)
	err := onnx.Expose(m, "hh")
	if err == nil || !strings.Contains(err.Error(), `candidates: h, y`) {
		t.Fatalf("unknown tensor: err = %v", err)
	}
	if err := onnx.Expose(m, "y"); err == nil || !strings.Contains(err.Error(), "already a graph output") {
		t.Fatalf("existing output: err = %v", err)
	}
	if err := onnx.Expose(m, "x"); err == nil || !strings.Contains(err.Error(), "no node produces") {
		t.Fatalf("graph input: err = %v", err)
	}
}
