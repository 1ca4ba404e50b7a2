package onnxrt

import (
	"errors"
	"fmt"

	ort "github.com/yalue/onnxruntime_go"
)

// Evaluator runs a model on the CPU provider with inputs of any shape and
// returns copies of the named outputs. It allocates per call: it is for
// tools and tests (export parity, expose checks), not for the frame loop.
type Evaluator struct {
	sess    *ort.DynamicAdvancedSession
	inputs  []string
	outputs []string
	release func() error
}

// NewEvaluator loads ONNX bytes with one float input and the given outputs.
func NewEvaluator(model []byte, library, input string, outputs []string) (*Evaluator, error) {
	return NewEvaluatorInputs(model, library, []string{input}, outputs)
}

// NewEvaluatorInputs loads ONNX bytes with the given float inputs and outputs.
func NewEvaluatorInputs(model []byte, library string, inputs, outputs []string) (*Evaluator, error) {
	_, release, err := Acquire(library)
	if err != nil {
		return nil, err
	}
	sess, err := ort.NewDynamicAdvancedSessionWithONNXData(model, inputs, outputs, nil)
	if err != nil {
		release()
		return nil, fmt.Errorf("load model for evaluation: %w", err)
	}
	return &Evaluator{sess: sess, inputs: append([]string(nil), inputs...), outputs: append([]string(nil), outputs...), release: release}, nil
}

// Run feeds data with the given shape to the one input and returns each
// output's values and shape.
func (e *Evaluator) Run(shape []int64, data []float32) ([][]float32, [][]int64, error) {
	return e.RunInputs([][]int64{shape}, [][]float32{data})
}

// RunInputs feeds one tensor per input (in NewEvaluatorInputs order) and
// returns each output's values and shape.
func (e *Evaluator) RunInputs(shapes [][]int64, data [][]float32) ([][]float32, [][]int64, error) {
	if len(shapes) != len(e.inputs) || len(data) != len(e.inputs) {
		return nil, nil, fmt.Errorf("evaluate: %d shapes and %d tensors for %d inputs", len(shapes), len(data), len(e.inputs))
	}
	ins := make([]ort.Value, len(e.inputs))
	defer func() {
		for _, v := range ins {
			if v != nil {
				v.Destroy()
			}
		}
	}()
	for i := range ins {
		in, err := ort.NewTensor(ort.NewShape(shapes[i]...), data[i])
		if err != nil {
			return nil, nil, fmt.Errorf("evaluate: input %q: %w", e.inputs[i], err)
		}
		ins[i] = in
	}
	outs := make([]ort.Value, len(e.outputs))
	defer func() {
		for _, v := range outs {
			if v != nil {
				v.Destroy()
			}
		}
	}()
	if err := e.sess.Run(ins, outs); err != nil {
		return nil, nil, fmt.Errorf("evaluate: %w", err)
	}
	vals := make([][]float32, len(outs))
	outShapes := make([][]int64, len(outs))
	for i, v := range outs {
		t, ok := v.(*ort.Tensor[float32])
		if !ok {
			return nil, nil, fmt.Errorf("evaluate: output %q is %T, want a float tensor", e.outputs[i], v)
		}
		vals[i] = append([]float32(nil), t.GetData()...)
		outShapes[i] = t.GetShape().Clone()
	}
	return vals, outShapes, nil
}

// Close releases the session and the environment reference.
func (e *Evaluator) Close() error {
	var errs []error
	if e.sess != nil {
		errs = append(errs, e.sess.Destroy())
		e.sess = nil
	}
	if e.release != nil {
		errs = append(errs, e.release())
		e.release = nil
	}
	return errors.Join(errs...)
}
