package offline

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/didoedge/didoedge/auxue/onnxexport"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/offline/depthnet"
	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/infer"
)

// DepthSpec is the IO spec of the exported reference depth network at a
// width: input "image" (1,3,Height,width), RGB in [0,1] with ImageNet
// mean/std, output "depth" in metres.
func DepthSpec(n *depthnet.Net, width int) infer.IOSpec {
	return infer.IOSpec{Kind: infer.KindDepth,
		Input: infer.InputSpec{Name: depthnet.InputName, Layout: infer.LayoutNCHW, Channels: 3, Height: n.Config.Height, Width: width,
			Color: infer.ColorRGB, PixelRange: 1, Mean: depthnet.Mean[:], Std: depthnet.Std[:], Resize: infer.ResizeStretch},
		Depth: infer.OutputSpec{Name: depthnet.OutputName, Meaning: infer.MeaningMetricDepth, Scale: 1}}
}

// WriteDepthArtifacts exports the network to DIR/NAME.onnx and its IO spec
// to DIR/NAME.yaml and returns both paths.
func WriteDepthArtifacts(n *depthnet.Net, dir, name string, width int) (model, spec string, err error) {
	m, err := n.Export(width)
	if err != nil {
		return "", "", err
	}
	text, err := DepthSpec(n, width).Marshal("IO spec (runtime/infer.IOSpec) of the didoedge reference depth network, written by didoedge train depth")
	if err != nil {
		return "", "", err
	}
	return writePair(dir, name, m, text)
}

// AuxUESpec is the IO spec of an AuxUE exported with its input contract
// for a depth model: it reads that model's image input (same layout and
// scaling; the AuxUE's input is named "image") and depth ("depth", metres
// or relative), with a contract that reads one the depth model's tensor
// also that tensor ("model_features"), and returns scale, epistemic and
// alpha.
func AuxUESpec(depth infer.IOSpec, c auxue.InputContract, m *auxue.Model, info infer.AuxUEInfo) infer.IOSpec {
	units := infer.UnitsMetres
	if c.Relative {
		units = infer.UnitsRelative
	}
	in := depth.Input
	in.Name = onnxexport.InputImage
	gh, gw := c.Grid()
	info.Factor, info.GridHeight, info.GridWidth = c.Factor, gh, gw
	info.MaxDepth, info.RowCoordinate = float64(c.MaxDepth), c.Row
	if c.Relative {
		info.MaxDepth = 0
	}
	cfg := m.Config
	info.Encoders = "separate"
	if cfg.SharedEncoder {
		info.Encoders = "shared"
	}
	info.EncoderWidth, info.Hidden, info.K, info.Lambda, info.UnlabeledKL = cfg.EncoderWidth, cfg.Hidden, cfg.K, cfg.Lambda, cfg.UnlabeledKL
	info.Aleatoric = "laplace"
	if cfg.GlobalContext {
		info.GlobalContext = max(cfg.GlobalContextBands, 1)
	}
	var mf *infer.ModelFeatureInput
	if f := c.Model; f != nil {
		mf = &infer.ModelFeatureInput{Name: onnxexport.InputModelFeatures, Tensor: f.Tensor, Channels: f.Channels, Height: f.Height, Width: f.Width}
		info.ModelFeatureChannels = f.Out
	}
	return infer.IOSpec{Kind: infer.KindAuxUE, Input: in,
		DepthInput:    infer.TensorSpec{Name: onnxexport.InputDepth, Units: units},
		ModelFeatures: mf,
		Scale:         infer.TensorSpec{Name: onnxexport.OutputScale, Units: units},
		Epistemic:     infer.TensorSpec{Name: onnxexport.OutputEpistemic},
		Alpha:         infer.TensorSpec{Name: onnxexport.OutputAlpha},
		AuxUE:         &info}
}

// WriteAuxArtifacts exports the AuxUE with its input contract to
// DIR/NAME.onnx and its IO spec to DIR/NAME.yaml.
func WriteAuxArtifacts(m *auxue.Model, c auxue.InputContract, depth infer.IOSpec, info infer.AuxUEInfo, dir, name string) (model, spec string, err error) {
	om, err := onnxexport.ExportAuxUEContract(m, c)
	if err != nil {
		return "", "", err
	}
	text, err := AuxUESpec(depth, c, m, info).Marshal("IO spec (runtime/infer.IOSpec) of an AuxUE that reads its depth model's image input and depth, written by didoedge train auxue")
	if err != nil {
		return "", "", err
	}
	return writePair(dir, name, om, text)
}

func writePair(dir, name string, m *onnx.Model, spec []byte) (string, string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("create %q: %w", dir, err)
	}
	model := filepath.Join(dir, name+".onnx")
	if err := onnx.WriteFile(model, m); err != nil {
		return "", "", fmt.Errorf("write %q: %w", model, err)
	}
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, spec, 0o644); err != nil {
		return "", "", fmt.Errorf("write %q: %w", path, err)
	}
	return model, path, nil
}
