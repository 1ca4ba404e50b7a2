package onnx

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// BatchParam is the symbolic name DynamicBatch gives the batch dimension
// (the name the project's exporter uses for a negative input dim).
const BatchParam = "N"

// BatchEdit reports what DynamicBatch changed.
type BatchEdit struct {
	// Declarations counts the graph inputs, outputs and value_info entries
	// whose first dimension became symbolic.
	Declarations int
	// Broadcasts lists the constant tensors (batch 1) that are concatenated
	// with batched tensors and now follow the batch through an Expand.
	Broadcasts []string
}

// DynamicBatch makes dimension 0 of a model symbolic (param, BatchParam
// when empty), so that one run takes N frames: every graph input, graph
// output and value_info entry that computes from an input gets the
// symbolic dim, and every constant of batch 1 that a Concat joins to a
// batched tensor along another axis (a row-coordinate plane, say) is
// expanded to the batch of that tensor at run time
// (Expand(c, Concat(Shape(x)[0:1], 1, ..., 1))). Weights are not touched:
// at batch 1 the edited graph computes what the original did.
//
// It refuses a graph whose batch is fixed in a way it cannot follow: a
// graph input whose batch is larger than 1, a Reshape or a Resize with a
// constant target whose first entry is a number (not 0 or -1 for Reshape)
// applied to batched data, an initializer of batch > 1 joined to batched
// data.
func DynamicBatch(m *Model, param string) (BatchEdit, error) {
	var edit BatchEdit
	if m == nil || m.Graph == nil {
		return edit, fmt.Errorf("dynamic batch: the model has no graph")
	}
	if param == "" {
		param = BatchParam
	}
	g := m.Graph
	inits := map[string]*Tensor{}
	for _, t := range g.Initializers {
		inits[t.Name] = t
	}
	// constant: computed from initializers and Constant nodes only (the
	// graph's nodes are in topological order, an ONNX requirement).
	constant := map[string]bool{}
	for name := range inits {
		constant[name] = true
	}
	producer := map[string]*Node{}
	names := map[string]bool{}
	for _, n := range g.Nodes {
		names[n.Name] = true
		all := true
		for _, in := range n.Inputs {
			if in != "" && !constant[in] {
				all = false
			}
		}
		for _, o := range n.Outputs {
			producer[o] = n
			names[o] = true
			if all && n.OpType != "RandomNormal" && n.OpType != "RandomUniform" {
				constant[o] = true
			}
		}
	}
	var problems []string
	batched := 0
	for _, v := range g.Inputs {
		if inits[v.Name] != nil {
			continue // a weight declared as an input
		}
		d, ok := firstDim(v)
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("input %q has no declared shape", v.Name))
		case d.HasValue && d.Value != 1:
			problems = append(problems, fmt.Sprintf("input %q has a fixed batch of %d", v.Name, d.Value))
		default:
			batched++
		}
	}
	if batched == 0 {
		problems = append(problems, "the graph has no input to batch")
	}
	// Shape-fixing constants applied to batched data.
	shapeInput := map[string]int{"Reshape": 1, "Resize": 3}
	for _, n := range g.Nodes {
		k, ok := shapeInput[n.OpType]
		if !ok || len(n.Inputs) <= k || n.Inputs[k] == "" || constant[n.Inputs[0]] {
			continue
		}
		t := inits[n.Inputs[k]]
		if t == nil {
			continue // computed at run time (Shape of the data): follows the batch
		}
		vals, err := t.Int64s()
		if err != nil || len(vals) == 0 {
			continue
		}
		if n.OpType == "Reshape" && (vals[0] == 0 || vals[0] == -1) {
			continue
		}
		problems = append(problems, fmt.Sprintf("%s node %q fixes the batch with the constant %s %v", n.OpType, n.Name, n.Inputs[k], vals))
	}
	fresh := func(prefix string) string {
		for i := 1; ; i++ {
			s := fmt.Sprintf("dynbatch_%s_%d", prefix, i)
			if !names[s] && inits[s] == nil {
				names[s] = true
				return s
			}
		}
	}
	ranks := newRankInference(g)
	rankOf := func(name string) (int, bool) {
		if t := inits[name]; t != nil {
			return len(t.Dims), true
		}
		if p := producer[name]; p != nil && p.OpType == "Expand" && len(p.Inputs) == 2 {
			if t := inits[p.Inputs[1]]; t != nil && len(t.Dims) == 1 {
				return int(t.Dims[0]), true
			}
		}
		return ranks.rank(name)
	}
	var nodes []*Node
	batchOf := map[string]string{} // batched tensor -> its (1)-shaped batch size tensor
	for _, n := range g.Nodes {
		if n.OpType == "Concat" && !constant[n.Outputs[0]] && concatAxis(n) != 0 {
			var x string
			for _, in := range n.Inputs {
				if in != "" && !constant[in] {
					x = in
					break
				}
			}
			for i, in := range n.Inputs {
				if in == "" || !constant[in] {
					continue
				}
				r, ok := rankOf(in)
				if !ok || r < 1 {
					problems = append(problems, fmt.Sprintf("Concat node %q: the rank of the constant %q is unknown", n.Name, in))
					continue
				}
				if t := inits[in]; t != nil && t.Dims[0] != 1 {
					problems = append(problems, fmt.Sprintf("Concat node %q joins the constant %q of batch %d to batched data", n.Name, in, t.Dims[0]))
					continue
				}
				nb, ok := batchOf[x]
				if !ok {
					shp := fresh("shape")
					nodes = append(nodes, &Node{Name: shp + "_node", OpType: "Shape", Inputs: []string{x}, Outputs: []string{shp}})
					starts, ends := fresh("start"), fresh("end")
					g.Initializers = append(g.Initializers, Int64Tensor(starts, []int64{1}, []int64{0}), Int64Tensor(ends, []int64{1}, []int64{1}))
					nb = fresh("n")
					nodes = append(nodes, &Node{Name: nb + "_node", OpType: "Slice", Inputs: []string{shp, starts, ends}, Outputs: []string{nb}})
					batchOf[x] = nb
				}
				ones := make([]int64, r-1)
				for j := range ones {
					ones[j] = 1
				}
				tail := fresh("ones")
				g.Initializers = append(g.Initializers, Int64Tensor(tail, []int64{int64(r - 1)}, ones))
				target := fresh("target")
				nodes = append(nodes, &Node{Name: target + "_node", OpType: "Concat", Inputs: []string{nb, tail}, Outputs: []string{target},
					Attributes: []*Attribute{IntAttr("axis", 0)}})
				out := fresh("expand")
				nodes = append(nodes, &Node{Name: out + "_node", OpType: "Expand", Inputs: []string{in, target}, Outputs: []string{out}})
				n.Inputs[i] = out
				edit.Broadcasts = append(edit.Broadcasts, in)
			}
		}
		nodes = append(nodes, n)
	}
	if len(problems) > 0 {
		return BatchEdit{}, fmt.Errorf("dynamic batch: %s", strings.Join(problems, "; "))
	}
	g.Nodes = nodes
	symbolic := func(v *ValueInfo) {
		if constant[v.Name] {
			return
		}
		if d, ok := firstDim(v); ok && (!d.HasValue || d.Value == 1) {
			v.Type.Tensor.Shape.Dims[0] = Dim{Param: param}
			edit.Declarations++
		}
	}
	for _, v := range g.Inputs {
		if inits[v.Name] == nil {
			symbolic(v)
		}
	}
	for _, v := range g.Outputs {
		symbolic(v)
	}
	for _, v := range g.ValueInfo {
		symbolic(v)
	}
	return edit, nil
}

// firstDim returns a tensor declaration's first dimension.
func firstDim(v *ValueInfo) (Dim, bool) {
	if v.Type == nil || v.Type.Tensor == nil || v.Type.Tensor.Shape == nil || len(v.Type.Tensor.Shape.Dims) == 0 {
		return Dim{}, false
	}
	return v.Type.Tensor.Shape.Dims[0], true
}

// concatAxis is a Concat node's axis attribute (ONNX requires it).
func concatAxis(n *Node) int64 {
	for _, a := range n.Attributes {
		if a.Name == "axis" {
			return a.I
		}
	}
	return 0
}

// Int64s returns an int64 tensor's values from raw_data or int64_data.
func (t *Tensor) Int64s() ([]int64, error) {
	if t.DataType != DataTypeInt64 {
		return nil, fmt.Errorf("tensor %q: data type %s, want int64", t.Name, DataTypeName(t.DataType))
	}
	if t.RawData == nil {
		return append([]int64(nil), t.Int64Data...), nil
	}
	if len(t.RawData)%8 != 0 {
		return nil, fmt.Errorf("tensor %q: raw_data length %d is not a multiple of 8", t.Name, len(t.RawData))
	}
	out := make([]int64, len(t.RawData)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(t.RawData[8*i:]))
	}
	return out, nil
}
