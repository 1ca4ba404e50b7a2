package depthnet

import (
	"fmt"

	"github.com/didoedge/didoedge/auxue/nn"
	"github.com/didoedge/didoedge/auxue/onnx"
)

// ONNX graph names of the exported depth model.
const (
	InputName  = "image" // (1,3,Height,W) normalized RGB, NCHW
	OutputName = "depth" // (1,1,Height,W) metric depth in metres
	// AuxFeaturesName is the AuxUE's input, computed in the depth graph
	// (1,C,Height/f,W/f), f = AuxOptions.Factor: the block means of the
	// normalized image (3) and of depth/MaxDepth (1), optionally the row
	// coordinate (1) and the decoder features (16*Width).
	AuxFeaturesName = "aux_features"
)

// AuxOptions selects what the aux_features output holds beyond the pooled
// image and depth (4 channels).
type AuxOptions struct {
	Decoder bool // append the decoder features (16*Width channels)
	Coord   bool // append the row coordinate (1 channel)
	// Factor is the AuxUE's downsampling (2, 4 or 8; 0 means 4): every
	// channel is the mean over Factor x Factor blocks.
	Factor int
}

// factor returns the effective downsampling.
func (o AuxOptions) factor() int {
	if o.Factor == 0 {
		return 4
	}
	return o.Factor
}

// AuxChannels is the channel count of the aux_features output.
func (n *Net) AuxChannels(o AuxOptions) int {
	c := 4
	if o.Decoder {
		c += 16 * n.Config.Width
	}
	if o.Coord {
		c++
	}
	return c
}

// Export writes the network as an ONNX model for a fixed (1,3,Height,width)
// input. The row-coordinate channel is built in the graph (a (1,1,H,1)
// constant expanded to the width), so the runtime feeds only the image.
// Besides depth it outputs aux_features, the AuxUE's half-resolution input,
// with the decoder features appended when decoder is true.
func (n *Net) Export(width int, aux AuxOptions) (*onnx.Model, error) {
	h := n.Config.Height
	if width < 16 || width%16 != 0 {
		return nil, fmt.Errorf("depthnet export: width %d must be a positive multiple of 16", width)
	}
	f := int64(aux.factor())
	if f != 2 && f != 4 && f != 8 {
		return nil, fmt.Errorf("depthnet export: aux factor %d, want 2, 4 or 8", f)
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
	poolBy := func(v string, k int64) string {
		if k == 1 {
			return v
		}
		return b.Op("AveragePool", []string{v}, onnx.IntsAttr("kernel_shape", k, k), onnx.IntsAttr("strides", k, k))
	}
	pool := func(v string) string { return poolBy(v, f) }
	parts := []onnx.Value{{Name: pool(InputName), Rank: 4},
		{Name: b.Op("Mul", []string{pool(OutputName), b.Const("inv_max_depth", nil, []float32{float32(1 / n.Config.MaxDepth)})}), Rank: 4}}
	if aux.Decoder { // the decoder features are at H/2 already
		parts = append(parts, onnx.Value{Name: poolBy(d.Name, f/2), Rank: 4})
	}
	if aux.Coord {
		parts = append(parts, onnx.Value{Name: pool(coord), Rank: 4})
	}
	feats, err := onnx.EmitConcat(b, parts...)
	if err != nil {
		return nil, fmt.Errorf("depthnet export: %w", err)
	}
	b.Rename(feats.Name, AuxFeaturesName)
	b.OutputShaped(OutputName, 1, 1, int64(h), int64(width))
	b.OutputShaped(AuxFeaturesName, 1, int64(n.AuxChannels(aux)), int64(h)/f, int64(width)/f)
	return b.Model(), nil
}
