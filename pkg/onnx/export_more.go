package onnx

import (
	"fmt"

	"github.com/didoedge/didoedge/pkg/nn"
)

// emitMore handles the image layers.
func emitMore(b *Builder, layer nn.Layer, x Value) (Value, error) {
	switch l := layer.(type) {
	case *nn.Conv2d:
		return emitConv(b, l, x)
	case *nn.Upsample:
		if x.Rank != 4 {
			return Value{}, fmt.Errorf("Upsample needs an NCHW input, got rank %d", x.Rank)
		}
		if l.Factor < 1 {
			return Value{}, fmt.Errorf("Upsample factor %d must be at least 1", l.Factor)
		}
		f := float32(l.Factor)
		scales := b.Const("resize_scales", []int64{4}, []float32{1, 1, f, f})
		return Value{b.Op("Resize", []string{x.Name, "", scales},
			StringAttr("mode", "linear"),
			StringAttr("coordinate_transformation_mode", "half_pixel")), 4}, nil
	case *nn.GlobalContext:
		if x.Rank != 4 {
			return Value{}, fmt.Errorf("GlobalContext needs an NCHW input, got rank %d", x.Rank)
		}
		if l.Bands <= 1 {
			mean := b.Op("ReduceMean", []string{x.Name}, IntsAttr("axes", 2, 3), IntAttr("keepdims", 1))
			spread := b.Op("Expand", []string{mean, b.Op("Shape", []string{x.Name})})
			return EmitConcat(b, x, Value{spread, 4})
		}
		nb := int64(l.Bands)
		bands := b.Op("Reshape", []string{x.Name, b.ConstInt64("bands_shape", []int64{4}, []int64{0, 0, nb, -1})})
		mean := b.Op("ReduceMean", []string{bands}, IntsAttr("axes", 3), IntAttr("keepdims", 1))
		flat := b.Op("Reshape", []string{mean, b.ConstInt64("context_shape", []int64{4}, []int64{0, -1, 1, 1})})
		size := b.Op("Concat", []string{b.ConstInt64("ones", []int64{2}, []int64{1, 1}),
			b.Op("Shape", []string{x.Name}, IntAttr("start", 2))}, IntAttr("axis", 0))
		spread := b.Op("Expand", []string{flat, size})
		return EmitConcat(b, x, Value{spread, 4})
	}
	return Value{}, unsupported(layer)
}

func emitConv(b *Builder, c *nn.Conv2d, x Value) (Value, error) {
	cfg := c.Config
	if x.Rank != 4 {
		return Value{}, fmt.Errorf("Conv2d needs an NCHW input, got rank %d", x.Rank)
	}
	stride, dil := max(cfg.Stride, 1), max(cfg.Dilation, 1)
	k := cfg.Kernel
	w, err := paramData(c.Weight, cfg.Out*cfg.In*k*k, "Conv2d weight")
	if err != nil {
		return Value{}, err
	}
	inputs := []string{x.Name, b.Const("conv_weight", []int64{int64(cfg.Out), int64(cfg.In), int64(k), int64(k)}, w)}
	if c.Bias != nil {
		bias, err := paramData(c.Bias, cfg.Out, "Conv2d bias")
		if err != nil {
			return Value{}, err
		}
		inputs = append(inputs, b.Const("conv_bias", []int64{int64(cfg.Out)}, bias))
	}
	p := int64(cfg.Padding)
	return Value{b.Op("Conv", inputs,
		IntsAttr("kernel_shape", int64(k), int64(k)),
		IntsAttr("strides", int64(stride), int64(stride)),
		IntsAttr("dilations", int64(dil), int64(dil)),
		IntsAttr("pads", p, p, p, p)), 4}, nil
}

// EmitConcat joins values along axis 1, as nn.Concat does.
func EmitConcat(b *Builder, xs ...Value) (Value, error) {
	if len(xs) == 0 {
		return Value{}, fmt.Errorf("Concat: no inputs")
	}
	names := make([]string, len(xs))
	for i, x := range xs {
		if x.Rank != xs[0].Rank {
			return Value{}, fmt.Errorf("Concat: input %d has rank %d, input 0 rank %d", i, x.Rank, xs[0].Rank)
		}
		names[i] = x.Name
	}
	return Value{b.Op("Concat", names, IntAttr("axis", 1)), xs[0].Rank}, nil
}
