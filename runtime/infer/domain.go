package infer

import "github.com/didoedge/didoedge/runtime/domain"

// DomainFrame is what the domain statistics (package runtime/domain) read
// of a frame's result: img is the input-size RGB8 picture the depth model
// saw (Result's or InferTimed's), w x h the depth model's input size; the
// maps are the native ones. The slices alias the models' buffers.
func DomainFrame(maps Maps, img []uint8, w, h int) domain.Frame {
	n := maps.Native
	return domain.Frame{RGB: img, Width: w, Height: h,
		Depth: n.Depth, DepthW: n.DepthW, DepthH: n.DepthH,
		Epistemic: n.Epistemic, Scale: n.Scale, AuxW: n.AuxW, AuxH: n.AuxH,
		Features: n.Features, FeatureC: n.FeatureC, FeatureH: n.FeatureH, FeatureW: n.FeatureW}
}

// DomainLayout is the domain-statistics layout for an AuxUE spec: the
// feature groups only when the AuxUE reads the depth model's tensor.
func DomainLayout(aux IOSpec) domain.Layout {
	return domain.DefaultLayout(aux.ModelFeatures != nil)
}
