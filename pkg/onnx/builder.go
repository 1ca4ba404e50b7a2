package onnx

import (
	"fmt"
	"strings"
)

// Builder assembles a graph node by node with unique tensor names.
type Builder struct {
	g     *Graph
	names map[string]int
}

// NewBuilder starts an empty graph with the given name.
func NewBuilder(name string) *Builder {
	return &Builder{g: &Graph{Name: name}, names: map[string]int{}}
}

// Name returns a fresh tensor or node name with the given prefix.
func (b *Builder) Name(prefix string) string {
	b.names[prefix]++
	return fmt.Sprintf("%s_%d", prefix, b.names[prefix])
}

// Input declares a graph input; negative dims are symbolic.
func (b *Builder) Input(name string, dims ...int64) string {
	b.g.Inputs = append(b.g.Inputs, TensorValueInfo(name, DataTypeFloat, dims))
	return name
}

// Output declares a float graph output of known rank whose dims are left
// for ONNX Runtime to infer.
func (b *Builder) Output(name string, rank int) {
	b.g.Outputs = append(b.g.Outputs, &ValueInfo{Name: name, Type: &TypeProto{Tensor: &TensorType{ElemType: DataTypeFloat, Shape: UnknownDims(rank)}}})
}

// OutputShaped declares a graph output with a known shape.
func (b *Builder) OutputShaped(name string, dims ...int64) {
	b.g.Outputs = append(b.g.Outputs, TensorValueInfo(name, DataTypeFloat, dims))
}

// Const adds a float32 initializer and returns its name.
func (b *Builder) Const(prefix string, dims []int64, data []float32) string {
	name := b.Name(prefix)
	b.g.Initializers = append(b.g.Initializers, FloatTensor(name, dims, data))
	return name
}

// ConstInt64 adds an int64 initializer and returns its name.
func (b *Builder) ConstInt64(prefix string, dims []int64, data []int64) string {
	name := b.Name(prefix)
	b.g.Initializers = append(b.g.Initializers, Int64Tensor(name, dims, data))
	return name
}

// Op adds a node with one output and returns the output's name. Empty input
// names stand for omitted optional inputs.
func (b *Builder) Op(opType string, inputs []string, attrs ...*Attribute) string {
	out := b.Name(strings.ToLower(opType))
	b.g.Nodes = append(b.g.Nodes, &Node{
		Name:       out + "_node",
		OpType:     opType,
		Inputs:     append([]string(nil), inputs...),
		Outputs:    []string{out},
		Attributes: attrs,
	})
	return out
}

// Rename changes the name of a tensor produced by a node (used to give graph
// outputs stable names).
func (b *Builder) Rename(from, to string) {
	for _, n := range b.g.Nodes {
		for i, s := range n.Inputs {
			if s == from {
				n.Inputs[i] = to
			}
		}
		for i, s := range n.Outputs {
			if s == from {
				n.Outputs[i] = to
			}
		}
	}
}

// Model wraps the graph in a ModelProto with the default opset.
func (b *Builder) Model() *Model {
	return &Model{
		IRVersion:    IRVersion,
		ProducerName: "didoedge",
		OpsetImports: []OpsetID{{Domain: "", Version: Opset}},
		Graph:        b.g,
	}
}

// IntAttr, IntsAttr, FloatAttr and StringAttr build node attributes.
func IntAttr(name string, v int64) *Attribute { return &Attribute{Name: name, Type: AttrInt, I: v} }

// IntsAttr builds an INTS attribute.
func IntsAttr(name string, v ...int64) *Attribute {
	return &Attribute{Name: name, Type: AttrInts, Ints: append([]int64{}, v...)}
}

// FloatAttr builds a FLOAT attribute.
func FloatAttr(name string, v float32) *Attribute {
	return &Attribute{Name: name, Type: AttrFloat, F: v}
}

// StringAttr builds a STRING attribute.
func StringAttr(name, v string) *Attribute {
	return &Attribute{Name: name, Type: AttrString, S: []byte(v)}
}
