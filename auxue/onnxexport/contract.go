package onnxexport

import (
	"fmt"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/pkg/onnx"
)

// Input names of an AuxUE exported with its input contract.
const (
	InputImage = "image" // the main model's image input, as that model receives it
	InputDepth = "depth" // (1,1,H,W) the main model's depth (metres or relative inverse depth)
	// InputModelFeatures is the main model's own feature tensor
	// (1,C,h,w), for a contract that reads one (auxue.ModelFeatures).
	InputModelFeatures = "model_features"
)

// ExportAuxUEContract exports a dense AuxUE together with its input
// contract (auxue.InputContract): the graph takes the main model's image
// input (NCHW (1,C,H,W) or NHWC (1,H,W,C)) and its depth map (1,1,H,W),
// computes the features in the graph (Transpose, Gather, Mul/Add to the
// ImageNet normalization, Pad edge, AveragePool; Clip and Mul, or the
// frame's z-score, for the depth; the row coordinate as a constant), runs
// the AuxUE on the grid, and returns scale and epistemic upsampled
// (Resize, linear, half_pixel) and cropped back to (1,1,H,W), and alpha
// (1,K,gh,gw) on the grid. A contract with Model takes a third input,
// model_features (1,C,h,w): projected (Conv 1x1) when the contract says
// so, resized to the grid (Resize, linear, half_pixel), normalized (Sub,
// Div) and joined after the row coordinate.
func ExportAuxUEContract(m *auxue.Model, c auxue.InputContract) (*onnx.Model, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("export auxue: %w", err)
	}
	if m.Config.Form != auxue.FormDense || m.Config.In != c.Channels() {
		return nil, fmt.Errorf("export auxue: model with form %d and %d inputs, the contract gives %d channels (dense form)", m.Config.Form, m.Config.In, c.Channels())
	}
	H, W, f := int64(c.Height), int64(c.Width), int64(c.Factor)
	gh, gw := c.Grid()
	padH, padW := int64(gh)*f-H, int64(gw)*f-W
	ch := int64(c.Image.Channels)
	b := onnx.NewBuilder("didoedge_auxue")
	var img string
	if c.Image.NHWC {
		img = b.Input(InputImage, 1, H, W, ch)
		img = b.Op("Transpose", []string{img}, onnx.IntsAttr("perm", 0, 3, 1, 2))
	} else {
		img = b.Input(InputImage, 1, ch, H, W)
	}
	depth := b.Input(InputDepth, 1, 1, H, W)
	if !c.Image.IsIdentity() {
		src := []int64{int64(c.Image.Src[0]), int64(c.Image.Src[1]), int64(c.Image.Src[2])}
		if !(ch == 3 && src[0] == 0 && src[1] == 1 && src[2] == 2) {
			img = b.Op("Gather", []string{img, b.ConstInt64("rgb_channels", []int64{3}, src)}, onnx.IntAttr("axis", 1))
		}
		img = b.Op("Mul", []string{img, b.Const("image_gain", []int64{1, 3, 1, 1}, c.Image.Gain[:])})
		img = b.Op("Add", []string{img, b.Const("image_offset", []int64{1, 3, 1, 1}, c.Image.Offset[:])})
	}
	pool := func(v string) string {
		if padH > 0 || padW > 0 {
			pads := b.ConstInt64("edge_pads", []int64{8}, []int64{0, 0, 0, 0, 0, 0, padH, padW})
			v = b.Op("Pad", []string{v, pads}, onnx.StringAttr("mode", "edge"))
		}
		if f == 1 {
			return v
		}
		return b.Op("AveragePool", []string{v}, onnx.IntsAttr("kernel_shape", f, f), onnx.IntsAttr("strides", f, f))
	}
	var d string
	if c.Relative {
		axes := onnx.IntsAttr("axes", 2, 3)
		mean := b.Op("ReduceMean", []string{depth}, axes, onnx.IntAttr("keepdims", 1))
		centred := b.Op("Sub", []string{depth, mean})
		variance := b.Op("ReduceMean", []string{b.Op("Mul", []string{centred, centred})}, axes, onnx.IntAttr("keepdims", 1))
		std := b.Op("Add", []string{b.Op("Sqrt", []string{variance}), b.Const("std_eps", nil, []float32{1e-6})})
		d = pool(b.Op("Div", []string{centred, std}))
	} else {
		clipped := b.Op("Clip", []string{depth, b.Const("depth_min", nil, []float32{0}), b.Const("depth_max", nil, []float32{c.MaxDepth})})
		d = b.Op("Mul", []string{pool(clipped), b.Const("inv_max_depth", nil, []float32{1 / c.MaxDepth})})
	}
	parts := []onnx.Value{{Name: pool(img), Rank: 4}, {Name: d, Rank: 4}}
	if c.Row {
		rows := c.RowFeature()
		plane := make([]float32, gh*gw)
		for v := 0; v < gh; v++ {
			for u := 0; u < gw; u++ {
				plane[v*gw+u] = rows[v]
			}
		}
		parts = append(parts, onnx.Value{Name: b.Const("row_coordinate", []int64{1, 1, int64(gh), int64(gw)}, plane), Rank: 4})
	}
	if mf := c.Model; mf != nil {
		x := b.Input(InputModelFeatures, 1, int64(mf.Channels), int64(mf.Height), int64(mf.Width))
		out := int64(mf.Out)
		if mf.Projection != nil {
			x = b.Op("Conv", []string{x, b.Const("feature_projection", []int64{out, int64(mf.Channels), 1, 1}, mf.Projection)})
		}
		if mf.Height != gh || mf.Width != gw {
			sizes := b.ConstInt64("feature_grid", []int64{4}, []int64{1, out, int64(gh), int64(gw)})
			x = b.Op("Resize", []string{x, "", "", sizes}, onnx.StringAttr("mode", "linear"),
				onnx.StringAttr("coordinate_transformation_mode", "half_pixel"))
		}
		if mf.Mean != nil {
			x = b.Op("Sub", []string{x, b.Const("feature_mean", []int64{1, out, 1, 1}, mf.Mean)})
			x = b.Op("Div", []string{x, b.Const("feature_std", []int64{1, out, 1, 1}, mf.Std)})
		}
		parts = append(parts, onnx.Value{Name: x, Rank: 4})
	}
	feats, err := onnx.EmitConcat(b, parts...)
	if err != nil {
		return nil, fmt.Errorf("export auxue: %w", err)
	}
	heads, err := emitAuxUE(b, m, feats)
	if err != nil {
		return nil, err
	}
	if heads.scale == "" {
		return nil, fmt.Errorf("export auxue: the %v aleatoric head has no single scale output", m.Config.Aleatoric.Kind)
	}
	scales := b.Const("upsample_scales", []int64{4}, []float32{1, 1, float32(f), float32(f)})
	full := func(v string) string {
		if f > 1 {
			v = b.Op("Resize", []string{v, "", scales}, onnx.StringAttr("mode", "linear"),
				onnx.StringAttr("coordinate_transformation_mode", "half_pixel"))
		}
		if padH > 0 || padW > 0 {
			v = b.Op("Slice", []string{v, b.ConstInt64("crop_starts", []int64{2}, []int64{0, 0}),
				b.ConstInt64("crop_ends", []int64{2}, []int64{H, W}), b.ConstInt64("crop_axes", []int64{2}, []int64{2, 3})})
		}
		return v
	}
	scale, epis := full(heads.scale), full(heads.epis)
	if scale == heads.scale { // factor 1, no padding: keep the output names distinct from inner tensors
		scale, epis = b.Op("Identity", []string{scale}), b.Op("Identity", []string{epis})
	}
	b.Rename(scale, OutputScale)
	b.Rename(epis, OutputEpistemic)
	b.Rename(heads.alpha, OutputAlpha)
	b.OutputShaped(OutputScale, 1, 1, H, W)
	b.OutputShaped(OutputEpistemic, 1, 1, H, W)
	b.OutputShaped(OutputAlpha, 1, int64(m.Config.K), int64(gh), int64(gw))
	return b.Model(), nil
}
