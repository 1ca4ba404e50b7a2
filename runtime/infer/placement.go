package infer

import (
	"fmt"

	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// Placement reports where ONNX Runtime assigned the nodes of the session's
// graph (nil when the library cannot tell).
func (s *Session) Placement() onnxrt.Placement {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.placement
}

// onGPU reports whether the session runs on a GPU provider: its provider
// is one and, when ONNX Runtime's placement is known, it holds nodes.
func (s *Session) onGPU() bool {
	p := s.providers[s.providerIdx]
	if !p.GPU() {
		return false
	}
	if s.placement == nil {
		return true
	}
	return s.placement.Nodes(onnxrt.ORTProviderName(onnxrt.ProviderCUDA))+s.placement.Nodes(onnxrt.ORTProviderName(onnxrt.ProviderTensorRT)) > 0
}

// checkRequired fails a required GPU provider that ONNX Runtime assigned
// no node to: registered, but every node runs elsewhere.
func (s *Session) checkRequired(_ int, p onnxrt.ProviderConfig) error {
	if !p.Required || !p.GPU() || s.placement == nil {
		return nil
	}
	if s.placement.Nodes(p.ORTName()) == 0 {
		return fmt.Errorf("ONNX Runtime assigned no node of %q to %s (placement: %s)", s.path, p.ORTName(), s.placement)
	}
	return nil
}
