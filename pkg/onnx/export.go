package onnx

import (
	"errors"
	"fmt"
	"math"

	"github.com/didoedge/didoedge/pkg/nn"
)

// ExportOptions names the graph's input and output and fixes the input shape.
type ExportOptions struct {
	GraphName  string  // default "didoedge"
	InputName  string  // default "input"
	OutputName string  // default "output"
	InputShape []int64 // e.g. (1,3,192,640); a negative dim is symbolic (dynamic)
}

// Export converts an pkg/nn network to an ONNX model (opset 17) whose
// inference output equals layer.Forward(x, nn.Eval). The op mapping:
//
//	Linear            Gemm(transB=1)
//	Conv2d            Conv (pads, strides, dilations)
//	CosineSimilarity  MatMul / 1x1 Conv with the raw weights, divided by
//	                  ReduceL2(x) * ||w_o|| + Eps (the Go formula, term by term)
//	ReLU, Softplus    Relu, Softplus
//	Exp{Clamp}        Clip(max=Clamp) then Exp
//	Upsample{Factor}  Resize(mode=linear, coordinate_transformation_mode=half_pixel)
//	GlobalContext     Concat(x, Expand(ReduceMean(x, axes=[2,3]), Shape(x)))
//	Concat            Concat(axis=1) of its branches' outputs
//	Dropout           omitted (identity at inference)
//	Sequential        its layers in order
func Export(layer nn.Layer, opts ExportOptions) (*Model, error) {
	if opts.GraphName == "" {
		opts.GraphName = "didoedge"
	}
	if opts.InputName == "" {
		opts.InputName = "input"
	}
	if opts.OutputName == "" {
		opts.OutputName = "output"
	}
	if len(opts.InputShape) != 2 && len(opts.InputShape) != 4 {
		return nil, fmt.Errorf("export: input shape %v: want (N,F) or (N,C,H,W)", opts.InputShape)
	}
	b := NewBuilder(opts.GraphName)
	in := b.Input(opts.InputName, opts.InputShape...)
	out, err := EmitLayer(b, layer, Value{Name: in, Rank: len(opts.InputShape)})
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	if out.Name == in {
		out.Name = b.Op("Identity", []string{in})
	}
	b.Rename(out.Name, opts.OutputName)
	b.Output(opts.OutputName, out.Rank)
	return b.Model(), nil
}

// Value is a tensor in a graph under construction: its name and rank.
type Value struct {
	Name string
	Rank int
}

// EmitLayer appends the nodes computing layer(x) in inference mode and
// returns the output. It is exported so that multi-head models (the AuxUE)
// can wire several networks into one graph.
func EmitLayer(b *Builder, layer nn.Layer, x Value) (Value, error) {
	switch l := layer.(type) {
	case *nn.Sequential:
		for i, sub := range l.Layers {
			var err error
			if x, err = EmitLayer(b, sub, x); err != nil {
				return Value{}, fmt.Errorf("Sequential layer %d: %w", i, err)
			}
		}
		return x, nil
	case *nn.Linear:
		return emitLinear(b, l, x)
	case *nn.CosineSimilarity:
		return emitCosine(b, l, x)
	case *nn.ReLU:
		return Value{b.Op("Relu", []string{x.Name}), x.Rank}, nil
	case *nn.Softplus:
		return Value{b.Op("Softplus", []string{x.Name}), x.Rank}, nil
	case *nn.Exp:
		clamp := l.Clamp
		if clamp == 0 {
			clamp = nn.DefaultExpClamp
		}
		maxName := b.Const("exp_clamp", nil, []float32{clamp})
		clipped := b.Op("Clip", []string{x.Name, "", maxName})
		return Value{b.Op("Exp", []string{clipped}), x.Rank}, nil
	case *nn.Dropout:
		return x, nil
	}
	return emitMore(b, layer, x)
}

func emitLinear(b *Builder, l *nn.Linear, x Value) (Value, error) {
	if x.Rank != 2 {
		return Value{}, fmt.Errorf("Linear(%d->%d) needs a rank-2 input, got rank %d", l.In, l.Out, x.Rank)
	}
	w, err := paramData(l.Weight, l.Out*l.In, "Linear weight")
	if err != nil {
		return Value{}, err
	}
	bias, err := paramData(l.Bias, l.Out, "Linear bias")
	if err != nil {
		return Value{}, err
	}
	wn := b.Const("linear_weight", []int64{int64(l.Out), int64(l.In)}, w)
	bn := b.Const("linear_bias", []int64{int64(l.Out)}, bias)
	return Value{b.Op("Gemm", []string{x.Name, wn, bn}, IntAttr("transB", 1)), 2}, nil
}

// emitCosine reproduces y_o = (w_o . x) / (||w_o|| ||x|| + Eps) with the same
// factors as the Go forward: the raw dot product, ReduceL2 over the feature
// axis, the weight norms as a constant, then one Mul, one Add and one Div.
func emitCosine(b *Builder, c *nn.CosineSimilarity, x Value) (Value, error) {
	w, err := paramData(c.Weight, c.Out*c.In, "CosineSimilarity weight")
	if err != nil {
		return Value{}, err
	}
	norms := make([]float32, c.Out)
	for o := range norms {
		var s float64
		for _, v := range w[o*c.In : (o+1)*c.In] {
			s += float64(v) * float64(v)
		}
		norms[o] = float32(math.Sqrt(s))
	}
	var dot, wnName string
	switch x.Rank {
	case 2:
		wt := make([]float32, len(w)) // (In, Out) for MatMul
		for o := 0; o < c.Out; o++ {
			for i := 0; i < c.In; i++ {
				wt[i*c.Out+o] = w[o*c.In+i]
			}
		}
		wtName := b.Const("cos_weight", []int64{int64(c.In), int64(c.Out)}, wt)
		dot = b.Op("MatMul", []string{x.Name, wtName})
		wnName = b.Const("cos_wnorm", []int64{1, int64(c.Out)}, norms)
	case 4:
		wName := b.Const("cos_weight", []int64{int64(c.Out), int64(c.In), 1, 1}, w)
		dot = b.Op("Conv", []string{x.Name, wName}, IntsAttr("kernel_shape", 1, 1))
		wnName = b.Const("cos_wnorm", []int64{1, int64(c.Out), 1, 1}, norms)
	default:
		return Value{}, fmt.Errorf("CosineSimilarity needs a rank-2 or rank-4 input, got rank %d", x.Rank)
	}
	xn := b.Op("ReduceL2", []string{x.Name}, IntsAttr("axes", 1), IntAttr("keepdims", 1))
	den := b.Op("Mul", []string{xn, wnName})
	eps := b.Const("cos_eps", nil, []float32{c.Eps})
	den = b.Op("Add", []string{den, eps})
	return Value{b.Op("Div", []string{dot, den}), x.Rank}, nil
}

// paramData returns a parameter's values after checking their count.
func paramData(p *nn.Param, want int, what string) ([]float32, error) {
	if p == nil || p.Value == nil {
		return nil, fmt.Errorf("%s: missing", what)
	}
	d := nn.Data(p.Value)
	if len(d) != want {
		return nil, fmt.Errorf("%s: %d values, want %d", what, len(d), want)
	}
	return d, nil
}

// ErrUnsupported wraps export errors for layer types without an ONNX mapping.
var ErrUnsupported = errors.New("layer type not supported by the ONNX exporter")

func unsupported(layer nn.Layer) error {
	return fmt.Errorf("%T: %w", layer, ErrUnsupported)
}
