package depthnet

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/auxue/onnx"
)

// AuxUE graph names. The exported AuxUE reads one tensor, "features"
// (1,C,H/2,W/2): the depth model's aux_features output (see Net.Export),
// i.e. the half-resolution image, depth/MaxDepth and optionally the depth
// decoder's features. It returns the Laplace scale b and the DIDO epistemic
// K/S bilinearly upsampled to (1,1,H,W), and the Dirichlet alpha at half
// resolution (1,K,H/2,W/2).
const (
	AuxInputName     = "features"
	AuxScaleName     = onnx.OutputScale
	AuxEpistemicName = onnx.OutputEpistemic
	AuxAlphaName     = onnx.OutputAlpha
)

// ExportAuxUE wraps the generalized AuxUE export of package auxue/onnx: the
// AuxUE runs on the (1,C,height/2,width/2) features and its scale and
// epistemic maps are upsampled to full resolution (Resize, half_pixel, the
// same as nn.Upsample).
func ExportAuxUE(m *auxue.Model, height, width int) (*onnx.Model, error) {
	if height%2 != 0 || width%2 != 0 || height < 2 || width < 2 {
		return nil, fmt.Errorf("export auxue: size %dx%d must be even", height, width)
	}
	inner, err := onnx.ExportAuxUE(m, []int64{1, int64(m.Config.In), int64(height / 2), int64(width / 2)})
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
	g.Initializers = append(g.Initializers, onnx.FloatTensor("wrap_resize_scales", []int64{4}, []float32{1, 1, 2, 2}))
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
		onnx.TensorValueInfo(AuxAlphaName, onnx.DataTypeFloat, []int64{1, int64(m.Config.K), h / 2, w / 2}),
	}
	return inner, nil
}

// AuxFeatures computes the first four channels of aux_features (4,H/2,W/2)
// from the normalized image (3,H,W) and the predicted depth (H,W): the mean
// of each 2x2 block, depth divided by maxDepth, as the exported graph does.
func AuxFeatures(img, depth []float32, height, width int, maxDepth float64, dst []float32) {
	h2, w2 := height/2, width/2
	hw := height * width
	inv := float32(1 / maxDepth)
	for c := 0; c < 4; c++ {
		var src []float32
		scale := float32(0.25)
		if c < 3 {
			src = img[c*hw : (c+1)*hw]
		} else {
			src, scale = depth, 0.25*inv
		}
		out := dst[c*h2*w2 : (c+1)*h2*w2]
		for v := 0; v < h2; v++ {
			r0, r1 := src[2*v*width:], src[(2*v+1)*width:]
			for u := 0; u < w2; u++ {
				out[v*w2+u] = (r0[2*u] + r0[2*u+1] + r1[2*u] + r1[2*u+1]) * scale
			}
		}
	}
}

// HalfResErrors turns full-resolution absolute errors |depth - gt| on the
// ground-truth pixels (gt > 0) into the AuxUE's half-resolution targets: a
// 2x2 block is valid when any of its pixels has ground truth, and its error
// is the mean over those pixels.
func HalfResErrors(depth, gt []float32, height, width int, errs []float32, valid []bool) {
	h2, w2 := height/2, width/2
	for v := 0; v < h2; v++ {
		for u := 0; u < w2; u++ {
			var s float32
			n := 0
			for dv := 0; dv < 2; dv++ {
				for du := 0; du < 2; du++ {
					i := (2*v+dv)*width + 2*u + du
					if y := gt[i]; y > 0 {
						e := depth[i] - y
						if e < 0 {
							e = -e
						}
						s += e
						n++
					}
				}
			}
			j := v*w2 + u
			valid[j] = n > 0
			errs[j] = 0
			if n > 0 {
				errs[j] = s / float32(n)
			}
		}
	}
}

// WriteAuxArtifacts exports the AuxUE to DIR/NAME.onnx and describes its IO
// in DIR/NAME.yaml; depthModel names the main model it was trained on.
func WriteAuxArtifacts(m *auxue.Model, dir, name string, height, width int, depthModel string) (model, spec string, err error) {
	om, err := ExportAuxUE(m, height, width)
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
  - {name: %s, shape: [1, %d, %d, %d], meaning: dirichlet_alpha_half_resolution}
auxue:
  resolution: half        # scale and epistemic are upsampled bilinearly to full resolution
  encoders: separate
  encoder_width: %d
  hidden: %d
  aleatoric: laplace
  k: %d
  lambda: %g
`, depthModel, AuxInputName, AuxFeaturesName, c.In, height/2, width/2,
		AuxScaleName, height, width, AuxEpistemicName, height, width, AuxAlphaName, c.K, height/2, width/2,
		c.EncoderWidth, c.Hidden, c.K, c.Lambda)
	spec = filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		return "", "", fmt.Errorf("write %q: %w", spec, err)
	}
	return model, spec, nil
}
