package onnxrt

import (
	"fmt"
	"math"

	ort "github.com/yalue/onnxruntime_go"
)

// Models whose inputs or outputs are not float32 (uint8 pixels of a
// quantized TFLite conversion, float16 of a half-precision export) keep
// every buffer the runtime reads and writes in float32: a Cast holds the
// model's own tensor beside it and converts the first n frames before a
// run (inputs) or after it (outputs). The frame path still allocates
// nothing.

// Cast is a non-float32 tensor of the model and its conversion.
type Cast struct {
	typ   ort.TensorElementDataType
	size  int // bytes per element
	per   int // elements per frame
	raw   []byte
	Full  *ort.CustomDataTensor   // maxBatch frames
	views []*ort.CustomDataTensor // [n-1]: the first n frames (batched runs)
}

// ElemSize is the byte size of the element types a Cast handles; 0 for
// float32 (no Cast) and for types the runtime does not convert.
func ElemSize(t ort.TensorElementDataType) int {
	switch t {
	case ort.TensorElementDataTypeFloat16:
		return 2
	case ort.TensorElementDataTypeUint8:
		return 1
	}
	return 0
}

// TypeName names an element type the way specs and messages do.
func TypeName(t ort.TensorElementDataType) string {
	switch t {
	case ort.TensorElementDataTypeFloat:
		return TypeFloat32
	case ort.TensorElementDataTypeFloat16:
		return TypeFloat16
	case ort.TensorElementDataTypeUint8:
		return TypeUint8
	}
	return t.String()
}

// NewCast allocates a Cast tensor of shape full (maxBatch frames of per
// elements each).
func NewCast(t ort.TensorElementDataType, full ort.Shape, per int) (*Cast, error) {
	c := &Cast{typ: t, size: ElemSize(t), per: per}
	if c.size == 0 {
		return nil, fmt.Errorf("element type %s is not converted (float32, float16 or uint8)", TypeName(t))
	}
	c.raw = make([]byte, int(full.FlattenedSize())*c.size)
	var err error
	if c.Full, err = ort.NewCustomDataTensor(full, c.raw, t); err != nil {
		return nil, err
	}
	return c, nil
}

// view returns a tensor over the first n frames (made once per n).
func (c *Cast) View(n int) (*ort.CustomDataTensor, error) {
	for len(c.views) < n {
		k := len(c.views) + 1
		t, err := ort.NewCustomDataTensor(WithBatch(c.Full.GetShape(), k), c.raw[:k*c.per*c.size], c.typ)
		if err != nil {
			return nil, err
		}
		c.views = append(c.views, t)
	}
	return c.views[n-1], nil
}

// from converts the first n frames of src (float32) into the tensor:
// uint8 rounds to nearest and clamps to [0, 255]; float16 rounds to
// nearest even.
func (c *Cast) From(src []float32, n int) {
	src = src[:n*c.per]
	switch c.typ {
	case ort.TensorElementDataTypeUint8:
		dst := c.raw[:len(src)]
		for i, v := range src {
			switch {
			case v >= 254.5:
				dst[i] = 255
			case v > 0: // NaN falls through to 0
				dst[i] = uint8(v + 0.5)
			default:
				dst[i] = 0
			}
		}
	case ort.TensorElementDataTypeFloat16:
		dst := c.raw[:2*len(src)]
		for i, v := range src {
			h := Float16(v)
			dst[2*i], dst[2*i+1] = uint8(h), uint8(h>>8) // little endian, as ONNX Runtime holds it
		}
	}
}

// into converts the first n frames of the tensor into dst (float32).
func (c *Cast) Into(dst []float32, n int) {
	dst = dst[:n*c.per]
	switch c.typ {
	case ort.TensorElementDataTypeUint8:
		for i := range dst {
			dst[i] = float32(c.raw[i])
		}
	case ort.TensorElementDataTypeFloat16:
		for i := range dst {
			dst[i] = Float32FromHalf(uint16(c.raw[2*i]) | uint16(c.raw[2*i+1])<<8)
		}
	}
}

func (c *Cast) Destroy() error {
	var err error
	for _, v := range c.views {
		if e := v.Destroy(); e != nil {
			err = e
		}
	}
	c.views = nil
	if c.Full != nil {
		if e := c.Full.Destroy(); e != nil {
			err = e
		}
		c.Full = nil
	}
	return err
}

// Float16 converts f to IEEE 754 half precision, rounding to nearest even;
// beyond 65504 it gives ±Inf, below 2^-25 ±0, NaN stays NaN.
func Float16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// A half subnormal m * 2^-24: m = M * 2^(e-14) with M the 24-bit
		// significand (implicit bit set), rounded to nearest even.
		if e < -10 {
			return sign
		}
		m24 := mant | 0x800000
		shift := uint(14 - e)
		m := m24 >> shift
		rem, half := m24&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || (rem == half && m&1 == 1) {
			m++ // 1024 is the smallest normal, encoded the same way
		}
		return sign | uint16(m)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // a carry into the exponent is right, up to Inf
	}
	return sign | uint16(h)
}

// Float32FromHalf converts an IEEE 754 half to float32 (exactly).
func Float32FromHalf(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// WithBatch returns sh with dim 0 set to n.
func WithBatch(sh ort.Shape, n int) ort.Shape {
	out := sh.Clone()
	out[0] = int64(n)
	return out
}

// Input element types, read from the model (the spec needs no key): the
// runtime normalizes into float32 and converts for the model.
const (
	TypeFloat32 = "float32"
	TypeFloat16 = "float16"
	TypeUint8   = "uint8" // raw pixels 0..255: pixel_range 255, no mean/std
)
