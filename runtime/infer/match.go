package infer

import (
	"errors"
	"fmt"
	"strings"

	ort "github.com/yalue/onnxruntime_go"
)

// matchSpec checks the spec against the model's declared inputs and outputs
// and returns the concrete input shape (batch 1) and the output shapes as
// declared (dynamic dims as -1, batch already set to 1). On mismatch the
// error lists the spec and the model's real inputs and outputs.
func matchSpec(spec IOSpec, inputs, outputs []ort.InputOutputInfo) (ort.Shape, []ort.Shape, error) {
	var problems []string
	want := ort.NewShape(1, int64(spec.channels()), int64(spec.Input.Height), int64(spec.Input.Width))
	in := findInfo(inputs, spec.Input.Name)
	switch {
	case in == nil:
		problems = append(problems, fmt.Sprintf("input %q not found", spec.Input.Name))
	case in.OrtValueType != ort.ONNXTypeTensor || in.DataType != ort.TensorElementDataTypeFloat:
		problems = append(problems, fmt.Sprintf("input %q is %s, want a float tensor", in.Name, describe(*in)))
	case len(in.Dimensions) != 4:
		problems = append(problems, fmt.Sprintf("input %q has shape %v, want NCHW %v", in.Name, in.Dimensions, want))
	default:
		for i, d := range in.Dimensions {
			if d >= 0 && d != want[i] {
				problems = append(problems, fmt.Sprintf("input %q has shape %v, the spec gives %v", in.Name, in.Dimensions, want))
				break
			}
		}
	}
	if len(inputs) > 1 {
		problems = append(problems, fmt.Sprintf("the model has %d inputs; only single-input models are supported", len(inputs)))
	}
	var shapes []ort.Shape
	for _, name := range spec.outputNames() {
		out := findInfo(outputs, name)
		switch {
		case out == nil:
			problems = append(problems, fmt.Sprintf("output %q not found", name))
			continue
		case out.OrtValueType != ort.ONNXTypeTensor || out.DataType != ort.TensorElementDataTypeFloat:
			problems = append(problems, fmt.Sprintf("output %q is %s, want a float tensor", name, describe(*out)))
			continue
		}
		sh := out.Dimensions.Clone()
		if len(sh) > 0 && sh[0] < 0 {
			sh[0] = 1
		}
		shapes = append(shapes, sh)
	}
	if len(problems) > 0 {
		return nil, nil, errors.New(strings.Join(problems, "; ") +
			"\n  spec:  input " + spec.Input.Name + " " + want.String() + ", outputs " + strings.Join(spec.outputNames(), ", ") +
			"\n  model: inputs " + describeAll(inputs) + "; outputs " + describeAll(outputs))
	}
	return want, shapes, nil
}

func findInfo(infos []ort.InputOutputInfo, name string) *ort.InputOutputInfo {
	for i := range infos {
		if infos[i].Name == name {
			return &infos[i]
		}
	}
	return nil
}

func describe(i ort.InputOutputInfo) string {
	if i.OrtValueType != ort.ONNXTypeTensor {
		return i.OrtValueType.String()
	}
	typ := i.DataType.String()
	if i.DataType == ort.TensorElementDataTypeFloat {
		typ = "float32"
	}
	return fmt.Sprintf("%s %v", typ, i.Dimensions)
}

func describeAll(infos []ort.InputOutputInfo) string {
	parts := make([]string, len(infos))
	for i, info := range infos {
		parts[i] = info.Name + " " + describe(info)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// needsProbe reports whether an output shape is not fully known from the
// model's declarations (a dynamic non-batch dim or an undeclared rank).
func needsProbe(shapes []ort.Shape) bool {
	for _, sh := range shapes {
		if len(sh) == 0 {
			return true
		}
		for _, d := range sh {
			if d < 0 {
				return true
			}
		}
	}
	return false
}

// probeOutputShapes runs the model once on zeros (CPU) to learn the concrete
// output shapes for the fixed input shape.
func probeOutputShapes(data []byte, inputName string, inShape ort.Shape, outNames []string) ([]ort.Shape, error) {
	sess, err := ort.NewDynamicAdvancedSessionWithONNXData(data, []string{inputName}, outNames, nil)
	if err != nil {
		return nil, fmt.Errorf("probe output shapes: %w", err)
	}
	defer sess.Destroy()
	in, err := ort.NewEmptyTensor[float32](inShape)
	if err != nil {
		return nil, fmt.Errorf("probe output shapes: %w", err)
	}
	defer in.Destroy()
	outs := make([]ort.Value, len(outNames))
	defer func() {
		for _, v := range outs {
			if v != nil {
				v.Destroy()
			}
		}
	}()
	if err := sess.Run([]ort.Value{in}, outs); err != nil {
		return nil, fmt.Errorf("probe output shapes: %w", err)
	}
	shapes := make([]ort.Shape, len(outs))
	for i, v := range outs {
		shapes[i] = v.GetShape().Clone()
	}
	return shapes, nil
}
