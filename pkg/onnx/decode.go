package onnx

import (
	"errors"
	"fmt"
	"math"
	"os"

	"google.golang.org/protobuf/encoding/protowire"
)

// ReadFile reads and decodes an ONNX model file.
func ReadFile(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read onnx model: %w", err)
	}
	m, err := Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("decode onnx model %q: %w", path, err)
	}
	return m, nil
}

// WriteFile encodes the model and writes it to path.
func WriteFile(path string, m *Model) error {
	if err := os.WriteFile(path, m.Marshal(), 0o644); err != nil {
		return fmt.Errorf("write onnx model: %w", err)
	}
	return nil
}

// Unmarshal decodes ONNX protobuf bytes. Fields it does not model are kept
// and re-emitted by Marshal.
func Unmarshal(b []byte) (*Model, error) {
	m := &Model{}
	err := eachField(b, "ModelProto", func(num protowire.Number, typ protowire.Type, v fieldValue) error {
		var err error
		switch {
		case num == 1 && typ == protowire.VarintType:
			m.IRVersion = int64(v.u)
		case num == 2 && typ == protowire.BytesType:
			m.ProducerName = string(v.b)
		case num == 3 && typ == protowire.BytesType:
			m.ProducerVersion = string(v.b)
		case num == 4 && typ == protowire.BytesType:
			m.Domain = string(v.b)
		case num == 5 && typ == protowire.VarintType:
			m.ModelVersion = int64(v.u)
		case num == 6 && typ == protowire.BytesType:
			m.DocString = string(v.b)
		case num == 7 && typ == protowire.BytesType:
			m.Graph, err = unmarshalGraph(v.b)
		case num == 8 && typ == protowire.BytesType:
			var o OpsetID
			o, err = unmarshalOpset(v.b)
			m.OpsetImports = append(m.OpsetImports, o)
		case num == 14 && typ == protowire.BytesType:
			var e StringEntry
			e, err = unmarshalEntry(v.b)
			m.MetadataProps = append(m.MetadataProps, e)
		default:
			m.unknown = append(m.unknown, v.raw...)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if m.Graph == nil {
		return nil, errors.New("ModelProto has no graph (not an ONNX model?)")
	}
	return m, nil
}

// fieldValue is one decoded field: its raw bytes (tag included) and its
// value as an unsigned integer or a byte slice depending on the wire type.
type fieldValue struct {
	raw []byte
	u   uint64
	b   []byte
}

// eachField walks the fields of one message and calls fn for each.
func eachField(b []byte, msg string, fn func(protowire.Number, protowire.Type, fieldValue) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%s: bad tag: %w", msg, protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return fmt.Errorf("%s field %d: %w", msg, num, protowire.ParseError(m))
		}
		v := fieldValue{raw: b[:n+m]}
		body := b[n : n+m]
		switch typ {
		case protowire.VarintType:
			v.u, _ = protowire.ConsumeVarint(body)
		case protowire.Fixed32Type:
			x, _ := protowire.ConsumeFixed32(body)
			v.u = uint64(x)
		case protowire.Fixed64Type:
			v.u, _ = protowire.ConsumeFixed64(body)
		case protowire.BytesType:
			v.b, _ = protowire.ConsumeBytes(body)
		}
		if err := fn(num, typ, v); err != nil {
			return fmt.Errorf("%s field %d: %w", msg, num, err)
		}
		b = b[n+m:]
	}
	return nil
}

func unmarshalOpset(b []byte) (OpsetID, error) {
	var o OpsetID
	err := eachField(b, "OperatorSetIdProto", func(num protowire.Number, typ protowire.Type, v fieldValue) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			o.Domain = string(v.b)
		case num == 2 && typ == protowire.VarintType:
			o.Version = int64(v.u)
		default:
			o.unknown = append(o.unknown, v.raw...)
		}
		return nil
	})
	return o, err
}

func unmarshalEntry(b []byte) (StringEntry, error) {
	var e StringEntry
	err := eachField(b, "StringStringEntryProto", func(num protowire.Number, typ protowire.Type, v fieldValue) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			e.Key = string(v.b)
		case num == 2 && typ == protowire.BytesType:
			e.Value = string(v.b)
		default:
			e.unknown = append(e.unknown, v.raw...)
		}
		return nil
	})
	return e, err
}

func unmarshalGraph(b []byte) (*Graph, error) {
	g := &Graph{}
	err := eachField(b, "GraphProto", func(num protowire.Number, typ protowire.Type, v fieldValue) error {
		if typ != protowire.BytesType {
			g.unknown = append(g.unknown, v.raw...)
			return nil
		}
		switch num {
		case 1:
			n, err := unmarshalNode(v.b)
			if err != nil {
				return err
			}
			g.Nodes = append(g.Nodes, n)
		case 2:
			g.Name = string(v.b)
		case 5:
			t, err := unmarshalTensor(v.b)
			if err != nil {
				return err
			}
			g.Initializers = append(g.Initializers, t)
		case 10:
			g.DocString = string(v.b)
		case 11, 12, 13:
			vi, err := unmarshalValueInfo(v.b)
			if err != nil {
				return err
			}
			switch num {
			case 11:
				g.Inputs = append(g.Inputs, vi)
			case 12:
				g.Outputs = append(g.Outputs, vi)
			default:
				g.ValueInfo = append(g.ValueInfo, vi)
			}
		default:
			g.unknown = append(g.unknown, v.raw...)
		}
		return nil
	})
	return g, err
}

func unmarshalNode(b []byte) (*Node, error) {
	n := &Node{}
	err := eachField(b, "NodeProto", func(num protowire.Number, typ protowire.Type, v fieldValue) error {
		if typ != protowire.BytesType {
			n.unknown = append(n.unknown, v.raw...)
			return nil
		}
		switch num {
		case 1:
			n.Inputs = append(n.Inputs, string(v.b))
		case 2:
			n.Outputs = append(n.Outputs, string(v.b))
		case 3:
			n.Name = string(v.b)
		case 4:
			n.OpType = string(v.b)
		case 5:
			a, err := unmarshalAttribute(v.b)
			if err != nil {
				return err
			}
			n.Attributes = append(n.Attributes, a)
		case 6:
			n.DocString = string(v.b)
		case 7:
			n.Domain = string(v.b)
		default:
			n.unknown = append(n.unknown, v.raw...)
		}
		return nil
	})
	return n, err
}

func unmarshalAttribute(b []byte) (*Attribute, error) {
	a := &Attribute{}
	err := eachField(b, "AttributeProto", func(num protowire.Number, typ protowire.Type, v fieldValue) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			a.Name = string(v.b)
		case num == 2 && typ == protowire.Fixed32Type:
			a.F = math.Float32frombits(uint32(v.u))
		case num == 3 && typ == protowire.VarintType:
			a.I = int64(v.u)
		case num == 4 && typ == protowire.BytesType:
			a.S = append([]byte{}, v.b...)
		case num == 5 && typ == protowire.BytesType:
			t, err := unmarshalTensor(v.b)
			if err != nil {
				return err
			}
			a.T = t
		case num == 7:
			return decodeFloats(typ, v, &a.Floats)
		case num == 8:
			return decodeVarints(typ, v, func(x uint64) { a.Ints = append(a.Ints, int64(x)) })
		case num == 9 && typ == protowire.BytesType:
			a.Strings = append(a.Strings, append([]byte{}, v.b...))
		case num == 20 && typ == protowire.VarintType:
			a.Type = int32(v.u)
		default:
			a.unknown = append(a.unknown, v.raw...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Writers that omit the type (proto2 allows it) are resolved from the
	// fields present so that Marshal re-emits the value.
	if a.Type == 0 {
		switch {
		case a.T != nil:
			a.Type = AttrTensor
		case len(a.Floats) > 0:
			a.Type = AttrFloats
		case len(a.Ints) > 0:
			a.Type = AttrInts
		}
	}
	return a, nil
}

func unmarshalTensor(b []byte) (*Tensor, error) {
	t := &Tensor{}
	err := eachField(b, "TensorProto", func(num protowire.Number, typ protowire.Type, v fieldValue) error {
		switch {
		case num == 1:
			return decodeVarints(typ, v, func(x uint64) { t.Dims = append(t.Dims, int64(x)) })
		case num == 2 && typ == protowire.VarintType:
			t.DataType = int32(v.u)
		case num == 4:
			return decodeFloats(typ, v, &t.FloatData)
		case num == 5:
			return decodeVarints(typ, v, func(x uint64) { t.Int32Data = append(t.Int32Data, int32(x)) })
		case num == 7:
			return decodeVarints(typ, v, func(x uint64) { t.Int64Data = append(t.Int64Data, int64(x)) })
		case num == 8 && typ == protowire.BytesType:
			t.Name = string(v.b)
		case num == 9 && typ == protowire.BytesType:
			t.RawData = append([]byte{}, v.b...)
		case num == 12 && typ == protowire.BytesType:
			t.DocString = string(v.b)
		default:
			t.unknown = append(t.unknown, v.raw...)
		}
		return nil
	})
	return t, err
}

func unmarshalValueInfo(b []byte) (*ValueInfo, error) {
	vi := &ValueInfo{}
	err := eachField(b, "ValueInfoProto", func(num protowire.Number, typ protowire.Type, v fieldValue) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			vi.Name = string(v.b)
		case num == 2 && typ == protowire.BytesType:
			tp, err := unmarshalType(v.b)
			if err != nil {
				return err
			}
			vi.Type = tp
		case num == 3 && typ == protowire.BytesType:
			vi.DocString = string(v.b)
		default:
			vi.unknown = append(vi.unknown, v.raw...)
		}
		return nil
	})
	return vi, err
}

func unmarshalType(b []byte) (*TypeProto, error) {
	tp := &TypeProto{}
	err := eachField(b, "TypeProto", func(num protowire.Number, typ protowire.Type, v fieldValue) error {
		if num != 1 || typ != protowire.BytesType {
			tp.unknown = append(tp.unknown, v.raw...)
			return nil
		}
		tt := &TensorType{}
		err := eachField(v.b, "TypeProto.Tensor", func(num protowire.Number, typ protowire.Type, v fieldValue) error {
			switch {
			case num == 1 && typ == protowire.VarintType:
				tt.ElemType = int32(v.u)
			case num == 2 && typ == protowire.BytesType:
				s, err := unmarshalShape(v.b)
				if err != nil {
					return err
				}
				tt.Shape = s
			default:
				tt.unknown = append(tt.unknown, v.raw...)
			}
			return nil
		})
		tp.Tensor = tt
		return err
	})
	return tp, err
}

func unmarshalShape(b []byte) (*Shape, error) {
	s := &Shape{}
	err := eachField(b, "TensorShapeProto", func(num protowire.Number, typ protowire.Type, v fieldValue) error {
		if num != 1 || typ != protowire.BytesType {
			s.unknown = append(s.unknown, v.raw...)
			return nil
		}
		var d Dim
		err := eachField(v.b, "TensorShapeProto.Dimension", func(num protowire.Number, typ protowire.Type, v fieldValue) error {
			switch {
			case num == 1 && typ == protowire.VarintType:
				d.Value, d.HasValue, d.Param = int64(v.u), true, ""
			case num == 2 && typ == protowire.BytesType:
				d.Param, d.HasValue, d.Value = string(v.b), false, 0
			default:
				d.unknown = append(d.unknown, v.raw...)
			}
			return nil
		})
		s.Dims = append(s.Dims, d)
		return err
	})
	return s, err
}

// decodeVarints reads a repeated varint field, packed or not.
func decodeVarints(typ protowire.Type, v fieldValue, add func(uint64)) error {
	switch typ {
	case protowire.VarintType:
		add(v.u)
		return nil
	case protowire.BytesType:
		p := v.b
		for len(p) > 0 {
			x, n := protowire.ConsumeVarint(p)
			if n < 0 {
				return fmt.Errorf("packed varints: %w", protowire.ParseError(n))
			}
			add(x)
			p = p[n:]
		}
		return nil
	}
	return fmt.Errorf("repeated integer field with wire type %d", typ)
}

// decodeFloats reads a repeated float field, packed or not.
func decodeFloats(typ protowire.Type, v fieldValue, dst *[]float32) error {
	switch typ {
	case protowire.Fixed32Type:
		*dst = append(*dst, math.Float32frombits(uint32(v.u)))
		return nil
	case protowire.BytesType:
		if len(v.b)%4 != 0 {
			return fmt.Errorf("packed floats: length %d is not a multiple of 4", len(v.b))
		}
		for p := v.b; len(p) > 0; p = p[4:] {
			x, _ := protowire.ConsumeFixed32(p)
			*dst = append(*dst, math.Float32frombits(x))
		}
		return nil
	}
	return fmt.Errorf("repeated float field with wire type %d", typ)
}
