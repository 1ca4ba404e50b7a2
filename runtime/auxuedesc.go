package runtime

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/didoedge/didoedge/auxue/onnx"
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
		Name    string  `yaml:"name"`
		Meaning string  `yaml:"meaning"`
		Shape   []int64 `yaml:"shape"`
	} `yaml:"outputs"`
	AuxUE struct {
		// K is the number of DIDO bins; the alpha output has K channels.
		K *int `yaml:"k"`
	} `yaml:"auxue"`
}

// meaningAlphaPrefix starts the meaning of the Dirichlet alpha output
// (dirichlet_alpha_auxue_resolution, ...).
const meaningAlphaPrefix = "dirichlet_alpha"

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
	if err := d.checkBins(name); err != nil {
		return infer.IOSpec{}, err
	}
	spec.Features = []infer.FeatureSpec{{Name: epistemic}}
	return spec, spec.Validate()
}

// checkBins checks auxue.k: DIDO needs at least two bins, and the alpha
// output, when listed with a shape, has k channels.
func (d *auxueDescription) checkBins(name string) error {
	if d.AuxUE.K == nil {
		return nil
	}
	k := *d.AuxUE.K
	if k < 2 || k > 1<<12 {
		return fmt.Errorf("%s: auxue.k: %d, want 2..4096 (DIDO discretizes the errors into K >= 2 bins)", name, k)
	}
	for i, out := range d.Outputs {
		if strings.HasPrefix(out.Meaning, meaningAlphaPrefix) && len(out.Shape) == 4 && out.Shape[1] != int64(k) {
			return fmt.Errorf("%s: auxue.k: %d, but outputs[%d] (%s) has %d channels, one per bin", name, k, i, out.Name, out.Shape[1])
		}
	}
	return nil
}

// CheckAuxUEModel compares an AuxUE description with the model file: every
// output it lists must be a graph output of the model, with the shape the
// model declares (where it declares one), and k must be the channel count
// of the model's alpha output; so a description written for another model
// (k: 1 against a 32-bin model) is refused before anything starts. A
// model file that does not parse is left to the model loader, whose error
// names it.
func CheckAuxUEModel(desc []byte, descName, modelPath string) error {
	var d auxueDescription
	if err := yaml.Unmarshal(desc, &d); err != nil {
		return fmt.Errorf("%s: %w", descName, err)
	}
	m, err := onnx.ReadFile(modelPath)
	if err != nil || m.Graph == nil {
		return nil
	}
	declared := map[string][]int64{}
	for _, v := range m.Graph.Outputs {
		var dims []int64
		if v.Type != nil && v.Type.Tensor != nil && v.Type.Tensor.Shape != nil {
			for _, dim := range v.Type.Tensor.Shape.Dims {
				val := int64(-1) // symbolic or unknown
				if dim.HasValue {
					val = dim.Value
				}
				dims = append(dims, val)
			}
		}
		declared[v.Name] = dims
	}
	for i, out := range d.Outputs {
		dims, ok := declared[out.Name]
		if !ok {
			return fmt.Errorf("%s: outputs[%d]: %q is not an output of %s", descName, i, out.Name, modelPath)
		}
		if len(out.Shape) > 0 && len(dims) > 0 && !sameShape(out.Shape, dims) {
			return fmt.Errorf("%s: outputs[%d] (%s): shape %v, but %s declares %v", descName, i, out.Name, out.Shape, modelPath, dims)
		}
		if strings.HasPrefix(out.Meaning, meaningAlphaPrefix) && d.AuxUE.K != nil && len(dims) == 4 && dims[1] > 0 && dims[1] != int64(*d.AuxUE.K) {
			return fmt.Errorf("%s: auxue.k: %d, but %s's alpha output %q has %d bins", descName, *d.AuxUE.K, modelPath, out.Name, dims[1])
		}
	}
	return nil
}

// sameShape compares a listed shape with a declared one (-1: any size).
func sameShape(listed, declared []int64) bool {
	if len(listed) != len(declared) {
		return false
	}
	for i := range listed {
		if declared[i] >= 0 && listed[i] != declared[i] {
			return false
		}
	}
	return true
}
