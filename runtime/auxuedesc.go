package runtime

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/didoedge/didoedge/runtime/infer"
)

// Meanings of the AuxUE outputs in the description file that `didoedge
// train auxue` writes beside auxue.onnx (auxue/depthnet).
const (
	MeaningLaplaceScale = "laplace_scale_b_metres"
	MeaningEpistemic    = "dido_epistemic_k_over_s"
)

// auxueDescription is the part of that file the runtime needs; its other
// keys (training details) are ignored.
type auxueDescription struct {
	Input struct {
		Name  string  `yaml:"name"`
		Shape []int64 `yaml:"shape"`
	} `yaml:"input"`
	Outputs []struct {
		Name    string `yaml:"name"`
		Meaning string `yaml:"meaning"`
	} `yaml:"outputs"`
}

// ParseAuxUEDescription turns an AuxUE description (input name and shape
// [1,C,H,W], outputs with meanings) into the runtime/infer IO spec the
// pipeline uses: the Laplace scale output in the depth slot, K/S as the
// first feature. name labels errors.
func ParseAuxUEDescription(data []byte, name string) (infer.IOSpec, error) {
	var d auxueDescription
	if err := yaml.Unmarshal(data, &d); err != nil {
		return infer.IOSpec{}, fmt.Errorf("%s: %w", name, err)
	}
	sh := d.Input.Shape
	if d.Input.Name == "" {
		return infer.IOSpec{}, fmt.Errorf("%s: input.name: empty", name)
	}
	if len(sh) != 4 || sh[0] != 1 || sh[1] < 1 || sh[2] < 1 || sh[3] < 1 || sh[1] > 1<<12 || sh[2] > 1<<14 || sh[3] > 1<<14 {
		return infer.IOSpec{}, fmt.Errorf("%s: input.shape: %v, want [1, C, H, W] with 1 <= C <= 4096 and 1 <= H, W <= 16384", name, sh)
	}
	spec := infer.IOSpec{
		Input: infer.InputSpec{Name: d.Input.Name, Layout: "NCHW", Channels: int(sh[1]), Height: int(sh[2]), Width: int(sh[3])},
		Depth: infer.OutputSpec{Meaning: infer.MeaningMetricDepth},
	}
	var epistemic string
	for i, out := range d.Outputs {
		if out.Name == "" {
			return infer.IOSpec{}, fmt.Errorf("%s: outputs[%d].name: empty", name, i)
		}
		switch out.Meaning {
		case MeaningLaplaceScale:
			spec.Depth.Name = out.Name
		case MeaningEpistemic:
			epistemic = out.Name
		}
	}
	switch {
	case spec.Depth.Name == "":
		return infer.IOSpec{}, fmt.Errorf("%s: outputs: none has meaning %s", name, MeaningLaplaceScale)
	case epistemic == "":
		return infer.IOSpec{}, fmt.Errorf("%s: outputs: none has meaning %s", name, MeaningEpistemic)
	case epistemic == spec.Depth.Name:
		return infer.IOSpec{}, fmt.Errorf("%s: the scale and epistemic outputs are both %q", name, epistemic)
	}
	spec.Features = []infer.FeatureSpec{{Name: epistemic}}
	return spec, spec.Validate()
}
