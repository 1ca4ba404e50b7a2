package infer

import (
	"fmt"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// createBatched builds the dynamic session for one provider and, for
// each batch size n, tensors over the first n slots and their IoBinding.
func (s *Session) createBatched(data []byte, cfg onnxrt.Config, p onnxrt.ProviderConfig, sha string, batch int) error {
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return fmt.Errorf("session options: %w", err)
	}
	defer opts.Destroy()
	if err := s.setThreading(opts, cfg); err != nil {
		return err
	}
	// ONNX Runtime's memory pattern plans one block per input shape and
	// keeps it: with batch sizes 1..N that is a block per size. Off, as
	// its documentation advises for varying shapes, the 4-camera RSS of
	// `bench multicam --dynamic-batch` fell from 337 to 253 MiB with the
	// same throughput (docs/runtime.md).
	if err := opts.SetMemPattern(false); err != nil {
		return fmt.Errorf("session options: %w", err)
	}
	if err := onnxrt.RecordPlacement(opts, s.lib); err != nil {
		return err
	}
	var sess *ort.DynamicAdvancedSession
	onnxrt.WithSignalsPreserved(func() {
		if err = onnxrt.AppendProvider(opts, s.lib.Path, p, sha, s.inputs[0].GetShape(), s.profile(batch)); err != nil {
			return
		}
		sess, err = ort.NewDynamicAdvancedSessionWithONNXData(data, s.spec.inputNames(), s.outNames, opts)
	})
	if err != nil {
		return err
	}
	s.dyn = sess
	inNames := s.spec.inputNames()
	for n := 1; n <= batch; n++ {
		b, err := sess.CreateIoBinding()
		if err != nil {
			return fmt.Errorf("io binding: %w", err)
		}
		s.bindings = append(s.bindings, b)
		s.batchIns = append(s.batchIns, nil)
		var vals []*ort.Tensor[float32]
		bind := func(name string, full *ort.Tensor[float32], c *onnxrt.Cast, per int, input bool) error {
			var v ort.Value
			if c != nil {
				t, err := c.View(n)
				if err != nil {
					return fmt.Errorf("batch %d tensor %q: %w", n, name, err)
				}
				v = t
			} else {
				t, err := ort.NewTensor(onnxrt.WithBatch(full.GetShape(), n), full.GetData()[:n*per])
				if err != nil {
					return fmt.Errorf("batch %d tensor %q: %w", n, name, err)
				}
				vals = append(vals, t)
				v = t
			}
			if input {
				s.batchIns[n-1] = append(s.batchIns[n-1], v)
				return b.BindInput(name, v)
			}
			return b.BindOutput(name, v)
		}
		for i, t := range s.inputs {
			if err := bind(inNames[i], t, s.inCast[i], s.inPer[i], true); err != nil {
				s.batchVals = append(s.batchVals, vals)
				return err
			}
		}
		for i, t := range s.outputs {
			if err := bind(s.outNames[i], t, s.outCast[i], s.outPer[i], false); err != nil {
				s.batchVals = append(s.batchVals, vals)
				return err
			}
		}
		s.batchVals = append(s.batchVals, vals)
	}
	return nil
}

// profile is the batch range of a dynamic-batch session: 1 to maxBatch
// frames of every input's shape.
func (s *Session) profile(batch int) *onnxrt.BatchProfile {
	b := &onnxrt.BatchProfile{Inputs: s.spec.inputNames(), Max: batch}
	for _, sh := range s.inShapes {
		b.Frame = append(b.Frame, onnxrt.WithBatch(sh, 1))
	}
	return b
}

// batchDynamic reports whether dim 0 of every input the spec feeds and
// every output it reads is symbolic; otherwise it names the first fixed one.
func batchDynamic(spec IOSpec, inputs, outputs []ort.InputOutputInfo) (bool, string) {
	check := func(kind string, infos []ort.InputOutputInfo, names []string) string {
		for _, n := range names {
			in := findInfo(infos, n)
			if in == nil {
				continue
			}
			if len(in.Dimensions) == 0 || in.Dimensions[0] >= 0 {
				return fmt.Sprintf("%s %q has shape %v", kind, n, in.Dimensions)
			}
		}
		return ""
	}
	if f := check("input", inputs, spec.inputNames()); f != "" {
		return false, f
	}
	if f := check("output", outputs, spec.outputNames()); f != "" {
		return false, f
	}
	return true, ""
}
