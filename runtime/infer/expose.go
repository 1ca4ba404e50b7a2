package infer

import (
	"fmt"

	"github.com/didoedge/didoedge/internal/boundedfile"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// ExposeTensors returns a copy of the ONNX model data with the named
// intermediate tensors added as graph outputs (pkg/onnx.Expose); names
// that already are outputs are left alone.
func ExposeTensors(data []byte, names []string) ([]byte, error) {
	m, err := onnx.Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("expose tensors: %w", err)
	}
	outs := map[string]bool{}
	for _, o := range m.Graph.Outputs {
		outs[o.Name] = true
	}
	changed := false
	for _, n := range names {
		if outs[n] {
			continue
		}
		if err := onnx.Expose(m, n); err != nil {
			return nil, fmt.Errorf("expose tensor %q: %w", n, err)
		}
		outs[n], changed = true, true
	}
	if !changed {
		return data, nil
	}
	return m.Marshal(), nil
}

// SpecMismatchError is ProbeTensorShapes' answer for a model that does not
// match its spec (OpenSession says the same, with both sides).
type SpecMismatchError struct {
	Path string
	Err  error
}

func (e *SpecMismatchError) Error() string {
	return fmt.Sprintf("model %q does not match its io spec: %v", e.Path, e.Err)
}

func (e *SpecMismatchError) Unwrap() error { return e.Err }

// TensorShape is the shape of one tensor learned by ProbeTensorShapes.
type TensorShape struct {
	Name  string
	Shape []int64
}

// ProbeTensorShapes loads the depth model at path with every named tensor
// exposed as an output, runs it once on the CPU on zeros of the spec's
// input size (batch 1) and returns the tensors' concrete shapes, in the
// order given. It allocates the outputs of one run: a tool's call (the
// automatic choice of an AuxUE's feature tensor), not for a frame loop.
func ProbeTensorShapes(path string, spec IOSpec, library string, names []string) ([]TensorShape, error) {
	data, err := boundedfile.Read("", path, boundedfile.Model)
	if err != nil {
		return nil, fmt.Errorf("probe tensor shapes: %w", err)
	}
	if len(names) == 0 {
		return nil, nil
	}
	_, release, err := onnxrt.Acquire(library)
	if err != nil {
		return nil, err
	}
	defer release()
	// The model as it is must match its spec first: a mismatch is the
	// spec's to report (OpenSession's message), not the probe's.
	inputs, outputs, err := ort.GetInputOutputInfoWithONNXData(data)
	if err != nil {
		return nil, fmt.Errorf("probe tensor shapes of %q: %w", path, err)
	}
	check := spec
	if check.Depth.Name == "" && len(outputs) > 0 {
		check.Depth.Name = outputs[0].Name // the finest output is resolved on load; the inputs matter here
	}
	inShapes, _, inTypes, _, err := matchSpec(check, inputs, outputs)
	if err != nil {
		return nil, &SpecMismatchError{Path: path, Err: err}
	}
	exposed, err := ExposeTensors(data, names)
	if err != nil {
		return nil, fmt.Errorf("probe tensor shapes of %q: %w", path, err)
	}
	shapes, err := probeOutputShapes(exposed, spec.inputNames(), inShapes, inTypes, names)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", path, err)
	}
	out := make([]TensorShape, len(names))
	for i, n := range names {
		out[i] = TensorShape{Name: n, Shape: []int64(shapes[i])}
	}
	return out, nil
}
