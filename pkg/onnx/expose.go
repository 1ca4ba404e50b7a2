package onnx

import (
	"fmt"
	"sort"
	"strings"
)

// Expose adds the intermediate tensor name as an extra graph output, so that
// a consumer (the AuxUE) can read main-model features from the same run. The
// output's type comes from the graph's value_info when present; otherwise it
// is declared float with an unknown shape (ONNX Runtime infers it).
func Expose(m *Model, name string) error {
	g := m.Graph
	for _, o := range g.Outputs {
		if o.Name == name {
			return fmt.Errorf("tensor %q is already a graph output", name)
		}
	}
	produced := false
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			if o == name {
				produced = true
			}
		}
	}
	if !produced {
		return fmt.Errorf("no node produces tensor %q; candidates: %s", name, strings.Join(Candidates(m, name, 8), ", "))
	}
	out := &ValueInfo{Name: name, Type: &TypeProto{Tensor: &TensorType{ElemType: DataTypeFloat}}}
	if rank, ok := newRankInference(g).rank(name); ok {
		out.Type.Tensor.Shape = UnknownDims(rank)
	}
	for _, v := range g.ValueInfo {
		if v.Name == name && v.Type != nil {
			out = &ValueInfo{Name: name, Type: v.Type, DocString: v.DocString}
			break
		}
	}
	g.Outputs = append(g.Outputs, out)
	return nil
}

// sameRankOp reports ops whose output has the rank of their first input.
func sameRankOp(op string) bool {
	switch op {
	case "Relu", "Exp", "Log", "Sqrt", "Softplus", "Sigmoid", "Tanh", "Clip", "Identity", "Neg", "Abs",
		"Dropout", "LeakyRelu", "Elu", "Conv", "ConvTranspose", "Resize", "BatchNormalization",
		"InstanceNormalization", "MaxPool", "AveragePool", "Concat", "Softmax", "Erf", "Floor", "Ceil",
		"Gelu", "HardSigmoid", "Reciprocal", "Cast", "Pad", "Upsample":
		return true
	}
	return false
}

// broadcastOp reports ops whose output rank is the largest input rank.
func broadcastOp(op string) bool {
	switch op {
	case "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "MatMul", "Where", "Gemm":
		return true
	}
	return false
}

// rankInference propagates tensor ranks backwards through common ops so
// that an exposed output gets a shape of the right rank (Debian's onnx
// checker requires a shape on graph outputs). Results are memoized, so the
// walk is linear in the graph size; a cycle yields "unknown".
type rankInference struct {
	g        *Graph
	producer map[string]*Node
	memo     map[string]int // -1: unknown or being computed
}

func newRankInference(g *Graph) *rankInference {
	r := &rankInference{g: g, producer: map[string]*Node{}, memo: map[string]int{}}
	for _, n := range g.Nodes {
		if len(n.Outputs) > 0 {
			r.producer[n.Outputs[0]] = n
		}
	}
	declared := func(v *ValueInfo) {
		if v.Type != nil && v.Type.Tensor != nil && v.Type.Tensor.Shape != nil {
			r.memo[v.Name] = len(v.Type.Tensor.Shape.Dims)
		}
	}
	for _, v := range g.Inputs {
		declared(v)
	}
	for _, t := range g.Initializers {
		r.memo[t.Name] = len(t.Dims)
	}
	for _, v := range g.ValueInfo {
		declared(v)
	}
	return r
}

func (r *rankInference) rank(name string) (int, bool) {
	if v, ok := r.memo[name]; ok {
		return v, v >= 0
	}
	r.memo[name] = -1
	v := r.compute(name)
	r.memo[name] = v
	return v, v >= 0
}

func (r *rankInference) compute(name string) int {
	n := r.producer[name]
	if n == nil || len(n.Inputs) == 0 {
		return -1
	}
	switch {
	case (n.OpType == "Conv" || n.OpType == "ConvTranspose") && len(n.Inputs) > 1:
		// The weight's rank is the output's, even where the input's rank
		// is lost (a Reshape of transformer tokens into a map).
		if v, ok := r.rank(n.Inputs[1]); ok {
			return v
		}
		v, _ := r.rank(n.Inputs[0])
		return v
	case sameRankOp(n.OpType):
		v, _ := r.rank(n.Inputs[0])
		return v
	case broadcastOp(n.OpType):
		rank := 0
		for _, in := range n.Inputs {
			if in == "" {
				continue
			}
			v, ok := r.rank(in)
			if !ok {
				return -1
			}
			rank = max(rank, v)
		}
		return rank
	case strings.HasPrefix(n.OpType, "Reduce"):
		for _, a := range n.Attributes {
			if a.Name == "keepdims" && a.I == 0 {
				return -1
			}
		}
		v, _ := r.rank(n.Inputs[0])
		return v
	}
	return -1
}

// MapCandidates lists, in graph order, the node outputs that may be
// feature maps of the model's image: tensors of rank 4 (as far as the rank
// propagation through common ops tells) computed from a graph input that
// is not an initializer. Their shapes are for ONNX Runtime to tell (a
// probe run); a consumer (the AuxUE's automatic feature input) picks
// among them.
func MapCandidates(m *Model) []string {
	g := m.Graph
	r := newRankInference(g)
	inits := map[string]bool{}
	for _, t := range g.Initializers {
		inits[t.Name] = true
	}
	fromInput := map[string]bool{}
	for _, v := range g.Inputs {
		if !inits[v.Name] {
			fromInput[v.Name] = true
		}
	}
	outputs := map[string]bool{}
	for _, o := range g.Outputs {
		outputs[o.Name] = true
	}
	var names []string
	for _, n := range g.Nodes { // nodes are topologically sorted (ONNX requires it)
		dep := false
		for _, in := range n.Inputs {
			dep = dep || fromInput[in]
		}
		for _, o := range n.Outputs {
			if o == "" || !dep {
				continue
			}
			fromInput[o] = true
			if v, ok := r.rank(o); ok && v == 4 && !outputs[o] {
				names = append(names, o)
			}
		}
	}
	return names
}

// Candidates lists up to max node-output tensor names, the ones closest to
// name (by edit distance, substring matches first) leading.
func Candidates(m *Model, name string, max int) []string {
	var names []string
	seen := map[string]bool{}
	for _, n := range m.Graph.Nodes {
		for _, o := range n.Outputs {
			if o != "" && !seen[o] {
				seen[o] = true
				names = append(names, o)
			}
		}
	}
	lname := strings.ToLower(name)
	score := func(s string) int {
		d := editDistance(lname, strings.ToLower(s))
		if lname != "" && strings.Contains(strings.ToLower(s), lname) {
			d -= 1000
		}
		return d
	}
	sort.SliceStable(names, func(i, j int) bool { return score(names[i]) < score(names[j]) })
	if len(names) > max {
		names = names[:max]
	}
	return names
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
