package infer

import "fmt"

// DepthInto reads the depth output of the last Run into dst (len(dst) =
// the depth map's size). Metric meanings give metres: values that are
// NaN, Inf or not positive after conversion are written as 0 (no depth)
// and counted. A relative model gives its relative inverse depth times
// scale; only non-finite values count as invalid (written 0).
func (s *Session) DepthInto(dst []float32) (invalid int, err error) {
	if s.spec.IsAuxUE() {
		return 0, fmt.Errorf("model %q: an AuxUE has no depth output", s.path)
	}
	return s.DepthSlotInto(0, dst)
}

// DepthSlotInto is DepthInto for frame k of the last batch.
func (s *Session) DepthSlotInto(slot int, dst []float32) (invalid int, err error) {
	if s.spec.IsAuxUE() {
		return 0, fmt.Errorf("model %q: an AuxUE has no depth output", s.path)
	}
	src := s.OutputSlot(0, slot)
	if len(dst) != len(src) {
		return 0, fmt.Errorf("model %q: depth buffer has %d values, output %q has %d", s.path, len(dst), s.outNames[0], len(src))
	}
	return s.spec.Depth.Readout(1).Apply(dst, src), nil
}

// DepthSlotReadout is DepthSlotInto through a given read-out (a
// camera-dependent output's focal factor folded in: Models).
func (s *Session) DepthSlotReadout(slot int, dst []float32, r Readout) (invalid int, err error) {
	if s.spec.IsAuxUE() {
		return 0, fmt.Errorf("model %q: an AuxUE has no depth output", s.path)
	}
	src := s.OutputSlot(0, slot)
	if len(dst) != len(src) {
		return 0, fmt.Errorf("model %q: depth buffer has %d values, output %q has %d", s.path, len(dst), s.outNames[0], len(src))
	}
	return r.Apply(dst, src), nil
}
