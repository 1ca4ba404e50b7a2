package onnxexport

import (
	"fmt"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/pkg/nn"
	"github.com/didoedge/didoedge/pkg/onnx"
)

// AuxUE output names.
const (
	OutputAleatoricRaw = "aleatoric_raw" // (N,P,...) raw sigma_Theta1 parameters
	OutputScale        = "scale"         // (N,1,...) Laplace b, or Gaussian sigma
	OutputAlpha        = "alpha"         // (N,K,...) Dirichlet alpha = exp(min(z, MaxLogit)) + 1
	OutputEpistemic    = "epistemic"     // (N,1,...) K / S, S = sum_k alpha_k
)

// ExportAuxUE converts a generalized AuxUE to ONNX with input "features"
// ((N,In) or (N,In,H,W)) and outputs aleatoric_raw, alpha and epistemic, plus
// scale for the one-parameter noise models (Laplace b = act(r); Gaussian
// sigma = sqrt(act(r))). The read-outs repeat auxue's formulas: the Exp
// activation clips r to [-MaxRaw, MaxRaw], Softplus is floored at 1e-12, the
// evidence clips logits at MaxLogit.
func ExportAuxUE(m *auxue.Model, inputShape []int64) (*onnx.Model, error) {
	cfg := m.Config
	wantRank := 2
	if cfg.Form == auxue.FormDense {
		wantRank = 4
	}
	if len(inputShape) != wantRank || (inputShape[1] >= 0 && inputShape[1] != int64(cfg.In)) {
		return nil, fmt.Errorf("export auxue: input shape %v, want rank %d with %d features/channels", inputShape, wantRank, cfg.In)
	}
	b := onnx.NewBuilder("auxue")
	x := onnx.Value{Name: b.Input("features", inputShape...), Rank: wantRank}
	h, err := emitAuxUE(b, m, x)
	if err != nil {
		return nil, err
	}
	b.Rename(h.raw, OutputAleatoricRaw)
	b.Rename(h.alpha, OutputAlpha)
	b.Rename(h.epis, OutputEpistemic)
	b.Output(OutputAleatoricRaw, wantRank)
	if h.scale != "" {
		b.Rename(h.scale, OutputScale)
		b.Output(OutputScale, wantRank)
	}
	b.Output(OutputAlpha, wantRank)
	b.Output(OutputEpistemic, wantRank)
	return b.Model(), nil
}

// auxHeads names the read-out tensors of an emitted AuxUE.
type auxHeads struct {
	raw, scale, alpha, epis string
}

// emitAuxUE appends the AuxUE's layers and read-outs on x.
func emitAuxUE(b *onnx.Builder, m *auxue.Model, x onnx.Value) (auxHeads, error) {
	cfg := m.Config
	f1, f2 := x, x
	var err error
	if m.Encoder != nil {
		if f1, err = onnx.EmitLayer(b, m.Encoder, x); err != nil {
			return auxHeads{}, fmt.Errorf("export auxue encoder: %w", err)
		}
		f2 = f1
		if m.EpisEncoder != nil {
			if f2, err = onnx.EmitLayer(b, m.EpisEncoder, x); err != nil {
				return auxHeads{}, fmt.Errorf("export auxue epistemic encoder: %w", err)
			}
		}
	}
	raw, err := onnx.EmitLayer(b, m.AleaHead, f1)
	if err != nil {
		return auxHeads{}, fmt.Errorf("export auxue aleatoric head: %w", err)
	}
	logits, err := onnx.EmitLayer(b, m.EpisHead, f2)
	if err != nil {
		return auxHeads{}, fmt.Errorf("export auxue epistemic head: %w", err)
	}

	// DIDO read-out: alpha = exp(min(z, MaxLogit)) + 1, epistemic = K / sum alpha.
	maxLogit := float32(m.DIDO.MaxLogit)
	if maxLogit == 0 {
		maxLogit = nn.DefaultExpClamp
	}
	ev, err := onnx.EmitLayer(b, &nn.Exp{Clamp: maxLogit}, logits)
	if err != nil {
		return auxHeads{}, err
	}
	alpha := b.Op("Add", []string{ev.Name, b.Const("one", nil, []float32{1})})
	s := b.Op("ReduceSum", []string{alpha, b.ConstInt64("axes", []int64{1}, []int64{1})}, onnx.IntAttr("keepdims", 1))
	epis := b.Op("Div", []string{b.Const("k", nil, []float32{float32(cfg.K)}), s})

	rawOut := raw.Name
	if raw.Name == f1.Name { // cannot happen with auxue's heads, but keep names distinct
		rawOut = b.Op("Identity", []string{raw.Name})
	}
	var scale string
	if cfg.Aleatoric.Kind == auxue.Laplace || cfg.Aleatoric.Kind == auxue.Gaussian {
		switch cfg.Aleatoric.Activation {
		case auxue.ActSoftplus:
			sp := b.Op("Softplus", []string{rawOut})
			scale = b.Op("Clip", []string{sp, b.Const("softplus_floor", nil, []float32{1e-12}), ""})
		default:
			clipped := b.Op("Clip", []string{rawOut,
				b.Const("raw_min", nil, []float32{-auxue.MaxRaw}), b.Const("raw_max", nil, []float32{auxue.MaxRaw})})
			scale = b.Op("Exp", []string{clipped})
		}
		if cfg.Aleatoric.Kind == auxue.Gaussian {
			scale = b.Op("Sqrt", []string{scale}) // act(r) is the variance
		}
	}
	return auxHeads{raw: rawOut, scale: scale, alpha: alpha, epis: epis}, nil
}
