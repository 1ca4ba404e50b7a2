package infer

import (
	"errors"
	"fmt"
	"strings"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// wantInputShapes are the concrete input shapes the spec feeds (batch 1),
// in inputNames order.
func (s IOSpec) wantInputShapes() []ort.Shape {
	h, w, c := int64(s.Input.Height), int64(s.Input.Width), int64(s.channels())
	first := ort.NewShape(1, c, h, w)
	if s.Layout() == LayoutNHWC {
		first = ort.NewShape(1, h, w, c)
	}
	shapes := []ort.Shape{first}
	if s.OwnsInputs() {
		shapes = append(shapes, ort.NewShape(1, 1, h, w))
		if f := s.ModelFeatures; f != nil {
			shapes = append(shapes, ort.NewShape(1, int64(f.Channels), int64(f.Height), int64(f.Width)))
		}
	}
	return shapes
}

// matchSpec checks the spec against the model's declared inputs and outputs
// and returns the concrete input shapes (batch 1, dynamic dims resolved at
// the spec's size) and the output shapes as declared (dynamic dims as -1,
// batch set to 1). On mismatch the error lists the spec and the model side
// by side.
func matchSpec(spec IOSpec, inputs, outputs []ort.InputOutputInfo) (_, _ []ort.Shape, inTypes, outTypes []ort.TensorElementDataType, _ error) {
	var problems []string
	want := spec.wantInputShapes()
	inNames := spec.inputNames()
	for i, name := range inNames {
		key := "input"
		switch i {
		case 1:
			key = "depth_input"
		case 2:
			key = "model_features"
		}
		in := findInfo(inputs, name)
		switch {
		case in == nil:
			problems = append(problems, fmt.Sprintf("%s: the model has no input %q", key, name))
		case in.OrtValueType != ort.ONNXTypeTensor || !inputTypeOK(spec, i, in.DataType):
			want := "a float32 tensor"
			if i == 0 && !spec.IsAuxUE() {
				want = "a float32, float16 or uint8 tensor"
			}
			problems = append(problems, fmt.Sprintf("%s: input %q is %s, want %s", key, in.Name, describe(*in), want))
		case in.DataType == ort.TensorElementDataTypeUint8 && !rawPixels(spec):
			problems = append(problems, fmt.Sprintf("input.pixel_range: input %q is uint8 (raw pixels 0..255): write pixel_range: 255 and no mean or std (the spec gives pixel_range %g, mean %v, std %v)",
				in.Name, spec.pixelRange(), spec.Input.Mean, spec.Input.Std))
		case len(in.Dimensions) != len(want[i]):
			problems = append(problems, fmt.Sprintf("%s: input %q has shape %v, the spec gives %s %v", key, in.Name, in.Dimensions, layoutName(spec, i), want[i]))
		default:
			for d, v := range in.Dimensions {
				if v >= 0 && v != want[i][d] {
					problems = append(problems, fmt.Sprintf("%s: input %q has shape %v, the spec gives %s %v", key, in.Name, in.Dimensions, layoutName(spec, i), want[i]))
					break
				}
			}
		}
	}
	for _, name := range inNames {
		if in := findInfo(inputs, name); in != nil {
			inTypes = append(inTypes, in.DataType)
		}
	}
	for _, in := range inputs {
		if !contains(inNames, in.Name) {
			problems = append(problems, fmt.Sprintf("the model's input %q is not fed by the spec (inputs it feeds: %s)", in.Name, strings.Join(inNames, ", ")))
		}
	}
	var shapes []ort.Shape
	roles := spec.outputRoles()
	for i, name := range spec.outputNames() {
		out := findInfo(outputs, name)
		switch {
		case out == nil:
			problems = append(problems, fmt.Sprintf("%s: the model has no output %q", roles[i], name))
			continue
		case out.OrtValueType != ort.ONNXTypeTensor || (out.DataType != ort.TensorElementDataTypeFloat && out.DataType != ort.TensorElementDataTypeFloat16):
			problems = append(problems, fmt.Sprintf("%s: output %q is %s, want a float32 or float16 tensor", roles[i], name, describe(*out)))
			continue
		}
		outTypes = append(outTypes, out.DataType)
		sh := out.Dimensions.Clone()
		if len(sh) > 0 && sh[0] < 0 {
			sh[0] = 1
		}
		shapes = append(shapes, sh)
	}
	if len(problems) > 0 {
		return nil, nil, nil, nil, mismatch(spec, inputs, outputs, problems)
	}
	return want, shapes, inTypes, outTypes, nil
}

// inputTypeOK reports whether input i may have element type t: a depth
// model's image takes float32, float16 or uint8 (converted from the
// normalized float32 frame); everything else float32.
func inputTypeOK(spec IOSpec, i int, t ort.TensorElementDataType) bool {
	if t == ort.TensorElementDataTypeFloat {
		return true
	}
	return i == 0 && !spec.IsAuxUE() && onnxrt.ElemSize(t) > 0
}

// rawPixels reports whether the spec feeds pixels 0..255 unchanged, what a
// uint8 input holds.
func rawPixels(spec IOSpec) bool {
	if spec.pixelRange() != 255 {
		return false
	}
	for _, m := range spec.means() {
		if m != 0 {
			return false
		}
	}
	for _, s := range spec.stds() {
		if s != 1 {
			return false
		}
	}
	return true
}

// checkOutputShapes checks the concrete output shapes against the roles:
// depth, scale and epistemic must each be one map (MapShape), a depth
// model's confidence one map of the depth's size, alpha (1,K,h,w).
func checkOutputShapes(spec IOSpec, shapes []ort.Shape, inputs, outputs []ort.InputOutputInfo) error {
	var problems []string
	roles, names := spec.outputRoles(), spec.outputNames()
	for i, sh := range shapes {
		switch roles[i] {
		case RoleDepth, RoleScale, RoleEpistemic:
			if _, _, err := MapShape(sh); err != nil {
				problems = append(problems, fmt.Sprintf("%s: output %q: %v", roles[i], names[i], err))
			}
		case RoleConfidence:
			dh, dw, err := MapShape(shapes[0])
			if err != nil {
				break // the depth output's own problem is reported
			}
			if err := checkConfidenceShape(names[i], sh, dh, dw); err != nil {
				problems = append(problems, err.Error())
			}
		case RoleAlpha:
			if len(sh) != 4 || sh[0] != 1 || sh[1] < 2 {
				problems = append(problems, fmt.Sprintf("alpha: output %q has shape %v, want (1,K,h,w)", names[i], sh))
			} else if spec.AuxUE != nil && spec.AuxUE.K > 0 && sh[1] != int64(spec.AuxUE.K) {
				// A spec written for another AuxUE (k: 8 against a 32-bin
				// model) would read the wrong bins' evidence.
				problems = append(problems, fmt.Sprintf("auxue.k: %d, but alpha output %q has %d bins (shape %v)", spec.AuxUE.K, names[i], sh[1], sh))
			}
		}
	}
	if len(problems) > 0 {
		return mismatch(spec, inputs, outputs, problems)
	}
	return nil
}

// mismatch joins the problems and shows the spec and the model side by side.
func mismatch(spec IOSpec, inputs, outputs []ort.InputOutputInfo, problems []string) error {
	want := spec.wantInputShapes()
	var in []string
	for i, n := range spec.inputNames() {
		in = append(in, fmt.Sprintf("%s %s %v", n, layoutName(spec, i), want[i]))
	}
	var out []string
	roles := spec.outputRoles()
	for i, n := range spec.outputNames() {
		out = append(out, roles[i]+"="+n)
	}
	return errors.New(strings.Join(problems, "; ") +
		"\n  spec:  inputs [" + strings.Join(in, ", ") + "]; outputs [" + strings.Join(out, ", ") + "]" +
		"\n  model: inputs " + describeAll(inputs) + "; outputs " + describeAll(outputs))
}

func layoutName(spec IOSpec, i int) string {
	switch {
	case i == 1:
		return "(1,1,H,W)"
	case i == 2:
		return "(1,C,h,w)"
	case spec.IsAuxUE() && !spec.OwnsInputs():
		return "NCHW"
	}
	return spec.Layout()
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
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
// output shapes for the fixed input shapes.
func probeOutputShapes(data []byte, inNames []string, inShapes []ort.Shape, inTypes []ort.TensorElementDataType, outNames []string) ([]ort.Shape, error) {
	sess, err := ort.NewDynamicAdvancedSessionWithONNXData(data, inNames, outNames, nil)
	if err != nil {
		return nil, fmt.Errorf("probe output shapes: %w", err)
	}
	defer sess.Destroy()
	ins := make([]ort.Value, len(inShapes))
	defer func() {
		for _, v := range ins {
			if v != nil {
				v.Destroy()
			}
		}
	}()
	for i, sh := range inShapes {
		var t ort.Value
		var err error
		if i < len(inTypes) && onnxrt.ElemSize(inTypes[i]) > 0 {
			t, err = ort.NewCustomDataTensor(sh, make([]byte, int(sh.FlattenedSize())*onnxrt.ElemSize(inTypes[i])), inTypes[i])
		} else {
			t, err = ort.NewEmptyTensor[float32](sh)
		}
		if err != nil {
			return nil, fmt.Errorf("probe output shapes: %w", err)
		}
		ins[i] = t
	}
	outs := make([]ort.Value, len(outNames))
	defer func() {
		for _, v := range outs {
			if v != nil {
				v.Destroy()
			}
		}
	}()
	if err := sess.Run(ins, outs); err != nil {
		return nil, fmt.Errorf("probe output shapes: %w", err)
	}
	shapes := make([]ort.Shape, len(outs))
	for i, v := range outs {
		shapes[i] = v.GetShape().Clone()
	}
	return shapes, nil
}

// finestOutput picks a depth model's depth output when its spec names
// none: among the float outputs that are one map (MapShape) and are not
// named as features, the largest H x W, the finest of a multi-scale
// export; the first in the model's order on a tie. Dynamic shapes are
// learned from one probe run at the spec's input size.
func finestOutput(data []byte, spec IOSpec, inputs, outputs []ort.InputOutputInfo) (string, error) {
	var cands []string
	var shapes []ort.Shape
	dynamic := false
	for _, out := range outputs {
		if out.OrtValueType != ort.ONNXTypeTensor || (out.DataType != ort.TensorElementDataTypeFloat && out.DataType != ort.TensorElementDataTypeFloat16) {
			continue
		}
		named := false
		for _, f := range spec.Features {
			named = named || f.Name == out.Name
		}
		if named || len(out.Dimensions) < 2 || len(out.Dimensions) > 4 {
			continue
		}
		sh := out.Dimensions.Clone()
		if sh[0] < 0 {
			sh[0] = 1
		}
		cands, shapes = append(cands, out.Name), append(shapes, sh)
		dynamic = dynamic || needsProbe([]ort.Shape{sh})
	}
	if len(cands) == 0 {
		return "", fmt.Errorf("empty, and the model has no float output of rank 2 to 4 to take as the depth map (outputs %s); name it", describeAll(outputs))
	}
	if dynamic {
		var types []ort.TensorElementDataType
		for _, n := range spec.inputNames() {
			if in := findInfo(inputs, n); in != nil {
				types = append(types, in.DataType)
			}
		}
		var err error
		if shapes, err = probeOutputShapes(data, spec.inputNames(), spec.wantInputShapes(), types, cands); err != nil {
			return "", fmt.Errorf("empty: %w", err)
		}
	}
	best, bestArea := "", 0
	for i, sh := range shapes {
		h, w, err := MapShape(sh)
		if err == nil && h*w > bestArea {
			best, bestArea = cands[i], h*w
		}
	}
	if best == "" {
		return "", fmt.Errorf("empty, and no output of %s is one map (H,W), (1,H,W), (1,1,H,W) or (1,H,W,1); name it", describeAll(outputs))
	}
	return best, nil
}
