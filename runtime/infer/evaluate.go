package infer

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
	outputs []string
	release func() error
}

// NewEvaluator loads ONNX bytes with one float input and the given outputs.
func NewEvaluator(model []byte, library, input string, outputs []string) (*Evaluator, error) {
	_, release, err := Acquire(library)
	if err != nil {
		return nil, err
	}
	sess, err := ort.NewDynamicAdvancedSessionWithONNXData(model, []string{input}, outputs, nil)
	if err != nil {
		release()
		return nil, fmt.Errorf("load model for evaluation: %w", err)
	}
	return &Evaluator{sess: sess, outputs: append([]string(nil), outputs...), release: release}, nil
}

// Run feeds data with the given shape and returns each output's values and shape.
func (e *Evaluator) Run(shape []int64, data []float32) ([][]float32, [][]int64, error) {
	in, err := ort.NewTensor(ort.NewShape(shape...), data)
	if err != nil {
		return nil, nil, fmt.Errorf("evaluate: input: %w", err)
	}
	defer in.Destroy()
	outs := make([]ort.Value, len(e.outputs))
	defer func() {
		for _, v := range outs {
			if v != nil {
				v.Destroy()
			}
		}
	}()
	if err := e.sess.Run([]ort.Value{in}, outs); err != nil {
		return nil, nil, fmt.Errorf("evaluate: %w", err)
	}
	vals := make([][]float32, len(outs))
	shapes := make([][]int64, len(outs))
	for i, v := range outs {
		t, ok := v.(*ort.Tensor[float32])
		if !ok {
			return nil, nil, fmt.Errorf("evaluate: output %q is %T, want a float tensor", e.outputs[i], v)
		}
		vals[i] = append([]float32(nil), t.GetData()...)
		shapes[i] = t.GetShape().Clone()
	}
	return vals, shapes, nil
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
