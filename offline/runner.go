package offline

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/didoedge/didoedge/auxue/depthnet"
	"github.com/didoedge/didoedge/runtime/infer"
)

// DepthRunner runs an exported depth model through ONNX Runtime
// (runtime/infer, CPU provider) exactly as the runtime does: RGB8 in,
// normalized by the IO spec, metric depth out.
type DepthRunner struct {
	sess          *infer.Session
	Width, Height int
	depth         []float32
}

// OpenDepthRunner loads model and its IO spec YAML; library may be empty
// (runtime/infer's lookup order applies).
func OpenDepthRunner(ctx context.Context, model, spec, library string, log *slog.Logger) (*DepthRunner, error) {
	data, err := os.ReadFile(spec)
	if err != nil {
		return nil, fmt.Errorf("depth io spec: %w", err)
	}
	s, err := infer.ParseIOSpec(data, spec)
	if err != nil {
		return nil, err
	}
	if len(s.Features) != 1 || s.Features[0].Name != depthnet.AuxFeaturesName {
		return nil, fmt.Errorf("depth io spec %q: want exactly one feature output, %q", spec, depthnet.AuxFeaturesName)
	}
	sess, err := infer.NewSession(ctx, model, s, infer.Config{Library: library}, log)
	if err != nil {
		return nil, err
	}
	return &DepthRunner{sess: sess, Width: s.Input.Width, Height: s.Input.Height,
		depth: make([]float32, s.Input.Width*s.Input.Height)}, nil
}

// AuxShape is the (channels, height, width) of the aux_features output.
func (r *DepthRunner) AuxShape() (c, h, w int) {
	s := r.sess.OutputShape(1)
	return int(s[1]), int(s[2]), int(s[3])
}

// Predict runs one RGB8 frame (width x height, interleaved) and returns the
// normalized input image (3,H,W), the depth (H,W) and the AuxUE's input
// aux_features (C,H/2,W/2); all are owned by the runner and overwritten by
// the next call.
func (r *DepthRunner) Predict(ctx context.Context, rgb []uint8, width, height int) (img, depth, aux []float32, err error) {
	if width != r.Width || height != r.Height {
		return nil, nil, nil, fmt.Errorf("depth runner: frame %dx%d, model wants %dx%d", width, height, r.Width, r.Height)
	}
	if err := r.sess.SetImageRGB8(rgb, width, height, width*3); err != nil {
		return nil, nil, nil, err
	}
	f, err := r.sess.Run(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	if !f.Valid {
		return nil, nil, nil, fmt.Errorf("depth runner: the depth model produced non-finite values")
	}
	if _, err := r.sess.DepthInto(r.depth); err != nil {
		return nil, nil, nil, err
	}
	return r.sess.Input(), r.depth, r.sess.Output(1), nil
}

// Close releases the session.
func (r *DepthRunner) Close() error { return r.sess.Close() }

// AuxRunner runs an exported AuxUE (see ExportAuxUE) through ONNX Runtime.
type AuxRunner struct {
	ev            *infer.Evaluator
	Width, Height int
	shape         []int64 // of the features input
}

// OpenAuxRunner loads the AuxUE model for width x height frames whose
// aux_features have the given (channels, height, width).
func OpenAuxRunner(model, library string, width, height, fc, fh, fw int) (*AuxRunner, error) {
	data, err := os.ReadFile(model)
	if err != nil {
		return nil, fmt.Errorf("auxue model: %w", err)
	}
	ev, err := infer.NewEvaluator(data, library, depthnet.AuxInputName, []string{depthnet.AuxScaleName, depthnet.AuxEpistemicName})
	if err != nil {
		return nil, fmt.Errorf("auxue model %q: %w", model, err)
	}
	return &AuxRunner{ev: ev, Width: width, Height: height, shape: []int64{1, int64(fc), int64(fh), int64(fw)}}, nil
}

// Predict returns the Laplace scale b and the DIDO epistemic K/S (H*W each)
// for the depth model's aux_features output.
func (r *AuxRunner) Predict(features []float32) (scale, epistemic []float32, err error) {
	hw := r.Width * r.Height
	if int64(len(features)) != r.shape[1]*r.shape[2]*r.shape[3] {
		return nil, nil, fmt.Errorf("auxue runner: %d feature values, want shape %v", len(features), r.shape)
	}
	outs, shapes, err := r.ev.Run(r.shape, features)
	if err != nil {
		return nil, nil, err
	}
	for i, o := range outs {
		if len(o) != hw {
			return nil, nil, fmt.Errorf("auxue runner: output %d has shape %v, want (1,1,%d,%d)", i, shapes[i], r.Height, r.Width)
		}
	}
	return outs[0], outs[1], nil
}

// Close releases the evaluator.
func (r *AuxRunner) Close() error { return r.ev.Close() }
