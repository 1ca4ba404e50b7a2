package depthnet

import (
	"fmt"

	"github.com/didoedge/didoedge/pkg/nn"
	"github.com/didoedge/didoedge/pkg/onnx"
)

// ONNX graph names of the exported depth model.
const (
	InputName  = "image" // (1,3,Height,W) normalized RGB, NCHW
	OutputName = "depth" // (1,1,Height,W) metric depth in metres
)

// Export writes the network as an ONNX model for a fixed (1,3,Height,width)
// input with the one output depth. The row-coordinate channel is built in
// the graph (a (1,1,H,1) constant expanded to the width), so the runtime
// feeds only the image. An AuxUE computes its own features from the image
// and the depth (auxue.InputContract); nothing is added for it here.
func (n *Net) Export(width int) (*onnx.Model, error) {
	h := n.Config.Height
	if width < 16 || width%16 != 0 {
		return nil, fmt.Errorf("depthnet export: width %d must be a positive multiple of 16", width)
	}
	b := onnx.NewBuilder("didoedge_depthnet")
	x := onnx.Value{Name: b.Input(InputName, 1, 3, int64(h), int64(width)), Rank: 4}
	rows := make([]float32, h)
	for v := range rows {
		rows[v] = RowCoordinate(v, h)
	}
	coord := b.Op("Expand", []string{b.Const("row_coordinate", []int64{1, 1, int64(h), 1}, rows),
		b.ConstInt64("coord_shape", []int64{4}, []int64{1, 1, int64(h), int64(width)})})
	var err error
	in, err := onnx.EmitConcat(b, x, onnx.Value{Name: coord, Rank: 4})
	if err != nil {
		return nil, fmt.Errorf("depthnet export: %w", err)
	}
	emit := func(l nn.Layer, v onnx.Value) onnx.Value {
		if err != nil {
			return onnx.Value{}
		}
		var out onnx.Value
		out, err = onnx.EmitLayer(b, l, v)
		return out
	}
	up := &nn.Upsample{Factor: 2}
	decode := func(dec nn.Layer, low, skip onnx.Value) onnx.Value {
		u := emit(up, low)
		if err != nil {
			return onnx.Value{}
		}
		var c onnx.Value
		if c, err = onnx.EmitConcat(b, u, skip); err != nil {
			return onnx.Value{}
		}
		return emit(dec, c)
	}
	e1 := emit(n.Enc1, in)
	e2 := emit(n.Enc2, e1)
	e3 := emit(n.Enc3, e2)
	e4 := emit(n.Enc4, e3)
	d := decode(n.Dec3, e4, e3)
	d = decode(n.Dec2, d, e2)
	d = decode(n.Dec1, d, e1)
	z := emit(n.Head, d)
	z = emit(up, z)
	if err != nil {
		return nil, fmt.Errorf("depthnet export: %w", err)
	}
	sig := b.Op("Sigmoid", []string{z.Name})
	depth := b.Op("Mul", []string{sig, b.Const("max_depth", nil, []float32{float32(n.Config.MaxDepth)})})
	b.Rename(depth, OutputName)
	b.OutputShaped(OutputName, 1, 1, int64(h), int64(width))
	return b.Model(), nil
}
