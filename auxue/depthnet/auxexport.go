package depthnet

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/auxue/onnx"
)

// AuxUE graph names. The exported AuxUE reads one tensor, "features"
// (1,C,H/f,W/f): the depth model's aux_features output (see Net.Export),
// i.e. the image, depth/MaxDepth and optionally the row coordinate and the
// decoder features at 1/f resolution. It returns the Laplace scale b and the
// DIDO epistemic K/S bilinearly upsampled to (1,1,H,W), and the Dirichlet
// alpha at the AuxUE's resolution (1,K,H/f,W/f).
const (
	AuxInputName     = "features"
	AuxScaleName     = onnx.OutputScale
	AuxEpistemicName = onnx.OutputEpistemic
	AuxAlphaName     = onnx.OutputAlpha
)

// ExportAuxUE wraps the generalized AuxUE export of package auxue/onnx: the
// AuxUE runs on the (1,C,height/factor,width/factor) features and its scale
// and epistemic maps are upsampled to full resolution (Resize, half_pixel,
// the same as nn.Upsample).
func ExportAuxUE(m *auxue.Model, height, width, factor int) (*onnx.Model, error) {
	if factor < 1 || height%factor != 0 || width%factor != 0 || height < factor || width < factor {
		return nil, fmt.Errorf("export auxue: size %dx%d must be a multiple of the factor %d", height, width, factor)
	}
	inner, err := onnx.ExportAuxUE(m, []int64{1, int64(m.Config.In), int64(height / factor), int64(width / factor)})
	if err != nil {
		return nil, err
	}
	g := inner.Graph
	for _, n := range g.Nodes {
		for i, s := range n.Outputs {
			switch s {
			case AuxScaleName, AuxEpistemicName:
				n.Outputs[i] = "wrap_half_" + s
			}
		}
	}
	h, w := int64(height), int64(width)
	g.Initializers = append(g.Initializers, onnx.FloatTensor("wrap_resize_scales", []int64{4}, []float32{1, 1, float32(factor), float32(factor)}))
	for _, name := range []string{AuxScaleName, AuxEpistemicName} {
		g.Nodes = append(g.Nodes, &onnx.Node{Name: "wrap_up_" + name, OpType: "Resize",
			Inputs: []string{"wrap_half_" + name, "", "wrap_resize_scales"}, Outputs: []string{name},
			Attributes: []*onnx.Attribute{onnx.StringAttr("mode", "linear"),
				onnx.StringAttr("coordinate_transformation_mode", "half_pixel")}})
	}
	g.Name = "didoedge_depth_auxue"
	g.Outputs = []*onnx.ValueInfo{
		onnx.TensorValueInfo(AuxScaleName, onnx.DataTypeFloat, []int64{1, 1, h, w}),
		onnx.TensorValueInfo(AuxEpistemicName, onnx.DataTypeFloat, []int64{1, 1, h, w}),
		onnx.TensorValueInfo(AuxAlphaName, onnx.DataTypeFloat, []int64{1, int64(m.Config.K), h / int64(factor), w / int64(factor)}),
	}
	return inner, nil
}

// WriteAuxArtifacts exports the AuxUE to DIR/NAME.onnx and describes its IO
// in DIR/NAME.yaml; depthModel names the main model it was trained on.
func WriteAuxArtifacts(m *auxue.Model, dir, name string, height, width, factor int, depthModel string) (model, spec string, err error) {
	om, err := ExportAuxUE(m, height, width, factor)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("create %q: %w", dir, err)
	}
	model = filepath.Join(dir, name+".onnx")
	if err := onnx.WriteFile(model, om); err != nil {
		return "", "", fmt.Errorf("write %q: %w", model, err)
	}
	c := m.Config
	text := fmt.Sprintf(`# IO of the didoedge reference AuxUE (auxue/depthnet); not a runtime/infer depth spec.
main_model: %s
input:
  name: %s       # feed the main model's %s output as is
  layout: NCHW
  shape: [1, %d, %d, %d]
outputs:
  - {name: %s, shape: [1, 1, %d, %d], meaning: laplace_scale_b_metres}
  - {name: %s, shape: [1, 1, %d, %d], meaning: dido_epistemic_k_over_s}
  - {name: %s, shape: [1, %d, %d, %d], meaning: dirichlet_alpha_auxue_resolution}
auxue:
  downsampling: %d        # the AuxUE runs at 1/%d resolution; scale and epistemic are upsampled bilinearly
  encoders: separate
  encoder_width: %d
  hidden: %d
  aleatoric: laplace
  k: %d
  lambda: %g
  unlabeled_kl: %g       # weight of the DIDO KL on blocks without ground truth (0: labeled blocks only)
  global_context: %t   # DIDO head reads each pixel's features and the frame's channel means
  global_context_bands: %d   # horizontal bands of those means (0 or 1: the whole frame)
`, depthModel, AuxInputName, AuxFeaturesName, c.In, height/factor, width/factor,
		AuxScaleName, height, width, AuxEpistemicName, height, width, AuxAlphaName, c.K, height/factor, width/factor,
		factor, factor, c.EncoderWidth, c.Hidden, c.K, c.Lambda, c.UnlabeledKL, c.GlobalContext, c.GlobalContextBands)
	spec = filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		return "", "", fmt.Errorf("write %q: %w", spec, err)
	}
	return model, spec, nil
}
