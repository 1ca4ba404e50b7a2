package onnx

import (
	"encoding/binary"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Versions written by this package. ir_version 8 and opset 17 are the newest
// that Debian's python3-onnx 1.12 checker accepts; ONNX Runtime 1.24 runs them.
const (
	IRVersion = 8
	Opset     = 17
)

// Tensor element types (TensorProto.DataType).
const (
	DataTypeFloat  = 1
	DataTypeUint8  = 2
	DataTypeInt8   = 3
	DataTypeInt32  = 6
	DataTypeInt64  = 7
	DataTypeString = 8
	DataTypeBool   = 9
	DataTypeDouble = 11
)

// Attribute types (AttributeProto.AttributeType).
const (
	AttrFloat   = 1
	AttrInt     = 2
	AttrString  = 3
	AttrTensor  = 4
	AttrGraph   = 5
	AttrFloats  = 6
	AttrInts    = 7
	AttrStrings = 8
)

// Model is ModelProto.
type Model struct {
	IRVersion       int64
	ProducerName    string
	ProducerVersion string
	Domain          string
	ModelVersion    int64
	DocString       string
	Graph           *Graph
	OpsetImports    []OpsetID
	MetadataProps   []StringEntry
	unknown         []byte
}

// OpsetID is OperatorSetIdProto.
type OpsetID struct {
	Domain  string
	Version int64
	unknown []byte
}

// StringEntry is StringStringEntryProto.
type StringEntry struct {
	Key, Value string
	unknown    []byte
}

// Graph is GraphProto.
type Graph struct {
	Nodes        []*Node
	Name         string
	Initializers []*Tensor
	DocString    string
	Inputs       []*ValueInfo
	Outputs      []*ValueInfo
	ValueInfo    []*ValueInfo
	unknown      []byte
}

// Node is NodeProto.
type Node struct {
	Inputs     []string
	Outputs    []string
	Name       string
	OpType     string
	Domain     string
	Attributes []*Attribute
	DocString  string
	unknown    []byte
}

// Attribute is AttributeProto. Graph-valued and sparse attributes are kept
// in the unknown bytes.
type Attribute struct {
	Name    string
	Type    int32
	F       float32
	I       int64
	S       []byte
	T       *Tensor
	Floats  []float32
	Ints    []int64
	Strings [][]byte
	unknown []byte
}

// Tensor is TensorProto. Float data is written as raw_data (little endian).
type Tensor struct {
	Dims      []int64
	DataType  int32
	Name      string
	RawData   []byte
	FloatData []float32
	Int32Data []int32
	Int64Data []int64
	DocString string
	unknown   []byte
}

// ValueInfo is ValueInfoProto. A nil Type means the type is unknown.
type ValueInfo struct {
	Name      string
	Type      *TypeProto
	DocString string
	unknown   []byte
}

// TypeProto keeps the tensor case (the only one the project writes); other
// cases (sequence, map, optional, sparse) survive as unknown bytes.
type TypeProto struct {
	Tensor  *TensorType
	unknown []byte
}

// TensorType is TypeProto.Tensor. A nil Shape means the rank is unknown.
type TensorType struct {
	ElemType int32
	Shape    *Shape
	unknown  []byte
}

// Shape is TensorShapeProto.
type Shape struct {
	Dims    []Dim
	unknown []byte
}

// Dim is TensorShapeProto.Dimension: a value, a symbolic parameter, or
// neither (unknown).
type Dim struct {
	Value    int64
	HasValue bool
	Param    string
	unknown  []byte
}

// ---- encoding -------------------------------------------------------------

// Marshal encodes the model as ONNX protobuf bytes.
func (m *Model) Marshal() []byte {
	var b []byte
	if m.IRVersion != 0 {
		b = appendVarintField(b, 1, uint64(m.IRVersion))
	}
	b = appendStringField(b, 2, m.ProducerName)
	b = appendStringField(b, 3, m.ProducerVersion)
	b = appendStringField(b, 4, m.Domain)
	if m.ModelVersion != 0 {
		b = appendVarintField(b, 5, uint64(m.ModelVersion))
	}
	b = appendStringField(b, 6, m.DocString)
	if m.Graph != nil {
		b = appendMessage(b, 7, m.Graph.marshal(nil))
	}
	for i := range m.OpsetImports {
		b = appendMessage(b, 8, m.OpsetImports[i].marshal(nil))
	}
	for i := range m.MetadataProps {
		b = appendMessage(b, 14, m.MetadataProps[i].marshal(nil))
	}
	return append(b, m.unknown...)
}

func (o *OpsetID) marshal(b []byte) []byte {
	// The domain is always written, empty included: writers (onnx.helper)
	// set it explicitly and proto2 keeps the presence.
	b = appendBytesField(b, 1, []byte(o.Domain))
	b = appendVarintField(b, 2, uint64(o.Version))
	return append(b, o.unknown...)
}

func (e *StringEntry) marshal(b []byte) []byte {
	b = appendStringField(b, 1, e.Key)
	b = appendStringField(b, 2, e.Value)
	return append(b, e.unknown...)
}

func (g *Graph) marshal(b []byte) []byte {
	for _, n := range g.Nodes {
		b = appendMessage(b, 1, n.marshal(nil))
	}
	b = appendStringField(b, 2, g.Name)
	for _, t := range g.Initializers {
		b = appendMessage(b, 5, t.marshal(nil))
	}
	b = appendStringField(b, 10, g.DocString)
	for _, v := range g.Inputs {
		b = appendMessage(b, 11, v.marshal(nil))
	}
	for _, v := range g.Outputs {
		b = appendMessage(b, 12, v.marshal(nil))
	}
	for _, v := range g.ValueInfo {
		b = appendMessage(b, 13, v.marshal(nil))
	}
	return append(b, g.unknown...)
}

func (n *Node) marshal(b []byte) []byte {
	for _, s := range n.Inputs {
		b = appendBytesField(b, 1, []byte(s))
	}
	for _, s := range n.Outputs {
		b = appendBytesField(b, 2, []byte(s))
	}
	b = appendStringField(b, 3, n.Name)
	b = appendStringField(b, 4, n.OpType)
	for _, a := range n.Attributes {
		b = appendMessage(b, 5, a.marshal(nil))
	}
	b = appendStringField(b, 6, n.DocString)
	b = appendStringField(b, 7, n.Domain)
	return append(b, n.unknown...)
}

func (a *Attribute) marshal(b []byte) []byte {
	b = appendStringField(b, 1, a.Name)
	switch a.Type {
	case AttrFloat:
		b = protowire.AppendTag(b, 2, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, math.Float32bits(a.F))
	case AttrInt:
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(a.I))
	case AttrString:
		b = appendBytesField(b, 4, a.S)
	case AttrTensor:
		if a.T != nil {
			b = appendMessage(b, 5, a.T.marshal(nil))
		}
	}
	if len(a.Floats) > 0 {
		p := make([]byte, 0, 4*len(a.Floats))
		for _, f := range a.Floats {
			p = protowire.AppendFixed32(p, math.Float32bits(f))
		}
		b = appendBytesField(b, 7, p)
	}
	if len(a.Ints) > 0 {
		var p []byte
		for _, v := range a.Ints {
			p = protowire.AppendVarint(p, uint64(v))
		}
		b = appendBytesField(b, 8, p)
	}
	for _, s := range a.Strings {
		b = appendBytesField(b, 9, s)
	}
	if a.Type != 0 {
		b = appendVarintField(b, 20, uint64(a.Type))
	}
	return append(b, a.unknown...)
}

func (t *Tensor) marshal(b []byte) []byte {
	if len(t.Dims) > 0 {
		var p []byte
		for _, d := range t.Dims {
			p = protowire.AppendVarint(p, uint64(d))
		}
		b = appendBytesField(b, 1, p)
	}
	if t.DataType != 0 {
		b = appendVarintField(b, 2, uint64(t.DataType))
	}
	if len(t.FloatData) > 0 {
		p := make([]byte, 0, 4*len(t.FloatData))
		for _, f := range t.FloatData {
			p = protowire.AppendFixed32(p, math.Float32bits(f))
		}
		b = appendBytesField(b, 4, p)
	}
	if len(t.Int32Data) > 0 {
		var p []byte
		for _, v := range t.Int32Data {
			p = protowire.AppendVarint(p, uint64(int64(v)))
		}
		b = appendBytesField(b, 5, p)
	}
	if len(t.Int64Data) > 0 {
		var p []byte
		for _, v := range t.Int64Data {
			p = protowire.AppendVarint(p, uint64(v))
		}
		b = appendBytesField(b, 7, p)
	}
	b = appendStringField(b, 8, t.Name)
	if t.RawData != nil {
		b = appendBytesField(b, 9, t.RawData)
	}
	b = appendStringField(b, 12, t.DocString)
	return append(b, t.unknown...)
}

func (v *ValueInfo) marshal(b []byte) []byte {
	b = appendStringField(b, 1, v.Name)
	if v.Type != nil {
		b = appendMessage(b, 2, v.Type.marshal(nil))
	}
	b = appendStringField(b, 3, v.DocString)
	return append(b, v.unknown...)
}

func (t *TypeProto) marshal(b []byte) []byte {
	if t.Tensor != nil {
		b = appendMessage(b, 1, t.Tensor.marshal(nil))
	}
	return append(b, t.unknown...)
}

func (t *TensorType) marshal(b []byte) []byte {
	b = appendVarintField(b, 1, uint64(t.ElemType))
	if t.Shape != nil {
		b = appendMessage(b, 2, t.Shape.marshal(nil))
	}
	return append(b, t.unknown...)
}

func (s *Shape) marshal(b []byte) []byte {
	for i := range s.Dims {
		b = appendMessage(b, 1, s.Dims[i].marshal(nil))
	}
	return append(b, s.unknown...)
}

func (d *Dim) marshal(b []byte) []byte {
	switch {
	case d.HasValue:
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(d.Value))
	case d.Param != "":
		b = appendBytesField(b, 2, []byte(d.Param))
	}
	return append(b, d.unknown...)
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// appendStringField writes a non-empty string (proto2 optional semantics:
// an empty string is the same as an absent one for every field we write).
func appendStringField(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytesField(b []byte, num protowire.Number, p []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, p)
}

func appendMessage(b []byte, num protowire.Number, msg []byte) []byte {
	return appendBytesField(b, num, msg)
}

// ---- tensor helpers --------------------------------------------------------

// FloatTensor returns a float32 initializer stored as raw_data.
func FloatTensor(name string, dims []int64, data []float32) *Tensor {
	raw := make([]byte, 4*len(data))
	for i, f := range data {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
	}
	return &Tensor{Name: name, Dims: append([]int64(nil), dims...), DataType: DataTypeFloat, RawData: raw}
}

// Int64Tensor returns an int64 initializer stored as raw_data.
func Int64Tensor(name string, dims []int64, data []int64) *Tensor {
	raw := make([]byte, 8*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
	}
	return &Tensor{Name: name, Dims: append([]int64(nil), dims...), DataType: DataTypeInt64, RawData: raw}
}

// Floats returns a float tensor's values from raw_data or float_data.
func (t *Tensor) Floats() ([]float32, error) {
	if t.DataType != DataTypeFloat {
		return nil, fmt.Errorf("tensor %q: data type %s, want float", t.Name, DataTypeName(t.DataType))
	}
	if t.RawData == nil {
		return append([]float32(nil), t.FloatData...), nil
	}
	if len(t.RawData)%4 != 0 {
		return nil, fmt.Errorf("tensor %q: raw_data length %d is not a multiple of 4", t.Name, len(t.RawData))
	}
	out := make([]float32, len(t.RawData)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.RawData[4*i:]))
	}
	return out, nil
}

// DataTypeName names a TensorProto.DataType for messages.
func DataTypeName(t int32) string {
	names := map[int32]string{ // built per call: no package-level mutable state
		1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
		8: "string", 9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64",
		14: "complex64", 15: "complex128", 16: "bfloat16",
	}
	if n, ok := names[t]; ok {
		return n
	}
	return fmt.Sprintf("type(%d)", t)
}

// UnknownDims returns a shape of the given rank with every dim unknown.
func UnknownDims(rank int) *Shape {
	return &Shape{Dims: make([]Dim, rank)}
}

// TensorValueInfo describes a float tensor with the given dims; a negative dim
// becomes the symbolic dimension "N" (batch) or "d<i>".
func TensorValueInfo(name string, elemType int32, dims []int64) *ValueInfo {
	s := &Shape{}
	for i, d := range dims {
		switch {
		case d >= 0:
			s.Dims = append(s.Dims, Dim{Value: d, HasValue: true})
		case i == 0:
			s.Dims = append(s.Dims, Dim{Param: "N"})
		default:
			s.Dims = append(s.Dims, Dim{Param: fmt.Sprintf("d%d", i)})
		}
	}
	return &ValueInfo{Name: name, Type: &TypeProto{Tensor: &TensorType{ElemType: elemType, Shape: s}}}
}
