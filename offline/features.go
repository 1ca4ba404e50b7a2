package offline

import (
	"fmt"
	"math"
	"os"

	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/infer"
)

// Values of AuxTrainConfig.ModelFeatures besides a tensor name.
const (
	// FeaturesAuto picks the depth model's feature tensor (ChooseFeatureTensor).
	FeaturesAuto = "auto"
	// FeaturesOff reads no depth-model tensor (the image and depth only).
	FeaturesOff = "off"
	// FeaturesConfidence reads the depth model's confidence output (its
	// spec's confidence.name) as the tensor: its raw values, normalized
	// by their mean and standard deviation on the training frames like
	// any feature tensor, resized to the AuxUE's grid.
	FeaturesConfidence = "confidence"
)

// The automatic choice's bounds: a tensor whose resolution is 1/4 to 1/8
// of the depth model's input (the side ratio r = sqrt(H W / (h w)),
// with 15 % of slack for sides that are not multiples of 8), with at
// least MinFeatureChannels channels (a one-channel map at 1/4 is a
// coarse depth output of a multi-scale export, not a feature map).
const (
	MinFeatureRatio    = 4 / 1.15
	MaxFeatureRatio    = 8 * 1.15
	MinFeatureChannels = 8
)

// FeatureChoice is the depth model's tensor an AuxUE reads.
type FeatureChoice struct {
	Tensor                  string
	Channels, Height, Width int
	// Ratio is the tensor's resolution against the depth model's input:
	// sqrt(H W / (h w)) (4: quarter resolution).
	Ratio float64
	// Candidates is how many rank-4 tensors of the graph were probed and
	// Eligible how many of them the rule admitted.
	Candidates, Eligible int
	// Auto: chosen by the rule (false: named by the user).
	Auto bool
}

// ChooseFeatureTensor finds the depth model's feature tensor for the
// AuxUE: the graph's rank-4 tensors computed from its input
// (pkg/onnx.MapCandidates) are exposed and probed in one ONNX Runtime run
// at the spec's input size for their shapes; among those of batch 1 with
// at least MinFeatureChannels channels at 1/4 to 1/8 of the input
// (MinFeatureRatio <= r <= MaxFeatureRatio), the finest resolution wins
// (r within 5 % of the smallest), and among those the last tensor the graph
// computes (the deepest features at that resolution: a decoder's rather
// than the encoder's). ok is false when the model has no such tensor.
func ChooseFeatureTensor(path string, spec infer.IOSpec, library string) (c FeatureChoice, ok bool, err error) {
	m, err := readONNX(path)
	if err != nil {
		return c, false, err
	}
	names := onnx.MapCandidates(m)
	if len(names) == 0 {
		return FeatureChoice{Auto: true}, false, nil
	}
	shapes, err := infer.ProbeTensorShapes(path, spec, library, names)
	if err != nil {
		return c, false, fmt.Errorf("choose the depth model's feature tensor (--model-features off reads none): %w", err)
	}
	c, ok = pickFeature(shapes, spec.Input.Height, spec.Input.Width)
	c.Candidates, c.Auto = len(names), true
	return c, ok, nil
}

// NamedFeatureTensor probes the shape of a tensor the user named.
func NamedFeatureTensor(path string, spec infer.IOSpec, library, name string) (FeatureChoice, error) {
	shapes, err := infer.ProbeTensorShapes(path, spec, library, []string{name})
	if err != nil {
		return FeatureChoice{}, fmt.Errorf("--model-features %q: %w", name, err)
	}
	sh := shapes[0].Shape
	if len(sh) != 4 || sh[0] != 1 || sh[1] < 1 || sh[2] < 1 || sh[3] < 1 {
		return FeatureChoice{}, fmt.Errorf("--model-features %q: tensor of shape %v, want a feature map (1,C,h,w)", name, sh)
	}
	return FeatureChoice{Tensor: name, Channels: int(sh[1]), Height: int(sh[2]), Width: int(sh[3]),
		Ratio: featureRatio(spec.Input.Height, spec.Input.Width, int(sh[2]), int(sh[3])), Candidates: 1, Eligible: 1}, nil
}

func featureRatio(H, W, h, w int) float64 {
	return math.Sqrt(float64(H) * float64(W) / (float64(h) * float64(w)))
}

// pickFeature applies the rule of ChooseFeatureTensor to probed shapes
// given in graph order.
func pickFeature(shapes []infer.TensorShape, H, W int) (FeatureChoice, bool) {
	var eligible []FeatureChoice
	for _, s := range shapes {
		sh := s.Shape
		if len(sh) != 4 || sh[0] != 1 || sh[1] < MinFeatureChannels || sh[2] < 1 || sh[3] < 1 {
			continue
		}
		r := featureRatio(H, W, int(sh[2]), int(sh[3]))
		if r < MinFeatureRatio || r > MaxFeatureRatio {
			continue
		}
		eligible = append(eligible, FeatureChoice{Tensor: s.Name, Channels: int(sh[1]), Height: int(sh[2]), Width: int(sh[3]), Ratio: r})
	}
	if len(eligible) == 0 {
		return FeatureChoice{}, false
	}
	finest := math.Inf(1)
	for _, e := range eligible {
		finest = min(finest, e.Ratio)
	}
	var best FeatureChoice
	for _, e := range eligible {
		if e.Ratio <= finest*1.05 {
			best = e // the last in graph order
		}
	}
	best.Eligible = len(eligible)
	return best, true
}

func readONNX(path string) (*onnx.Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read depth model: %w", err)
	}
	m, err := onnx.Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("depth model %q: %w", path, err)
	}
	return m, nil
}
