package nn

import (
	"fmt"

	"gorgonia.org/tensor"
)

// Sequential chains layers: the output of each is the input of the next.
type Sequential struct {
	Layers []Layer
}

// Forward runs the layers in order; an error names the failing layer's index.
// Outside training (mode Eval or MonteCarlo) a Conv2d followed by a ReLU
// runs as one layer: the convolution writes max(y, 0) as it copies its
// tiles out (the values the ReLU computes, without another pass over the
// activations), and the ReLU keeps no Forward of its own. Training runs
// every layer, since Backward needs each one's state.
func (s *Sequential) Forward(x *tensor.Dense, mode Mode) (*tensor.Dense, error) {
	if len(s.Layers) == 0 {
		return nil, fmt.Errorf("Sequential: no layers")
	}
	return s.forwardFrom(0, x, mode)
}

// ForwardConcat runs the layers on the channel concatenation of parts, a
// part with Up resized by it first, without building the resized or the
// concatenated tensor: the first layer, which must be a Conv2d, reads the
// parts straight into its padded input planes. The result is bit-identical
// to Upsample, Concat and Forward. Inference only (mode Eval or
// MonteCarlo): Backward could not split the input gradient into the parts.
func (s *Sequential) ForwardConcat(mode Mode, parts ...ConvInput) (*tensor.Dense, error) {
	if mode == Train {
		return nil, fmt.Errorf("Sequential.ForwardConcat: inference only, not in Train mode")
	}
	if len(s.Layers) == 0 {
		return nil, fmt.Errorf("Sequential: no layers")
	}
	conv, ok := s.Layers[0].(*Conv2d)
	if !ok {
		return nil, fmt.Errorf("Sequential.ForwardConcat: layer 0 is %T, want *nn.Conv2d", s.Layers[0])
	}
	relu := s.fusedReLU(0)
	y, err := conv.forward(parts, relu != nil)
	if err != nil {
		return nil, fmt.Errorf("Sequential layer 0 (%T) forward: %w", conv, err)
	}
	next := 1
	if relu != nil {
		relu.skip()
		next = 2
	}
	return s.forwardFrom(next, y, mode)
}

// forwardFrom runs layers first, first+1, … on x, fusing each Conv2d with
// a ReLU after it outside training.
func (s *Sequential) forwardFrom(first int, x *tensor.Dense, mode Mode) (*tensor.Dense, error) {
	var err error
	for i := first; i < len(s.Layers); i++ {
		l := s.Layers[i]
		if conv, ok := l.(*Conv2d); ok && mode != Train {
			if relu := s.fusedReLU(i); relu != nil {
				in := [1]ConvInput{{X: x}}
				if x, err = conv.forward(in[:], true); err != nil {
					return nil, fmt.Errorf("Sequential layer %d (%T) forward: %w", i, l, err)
				}
				relu.skip()
				i++
				continue
			}
		}
		if x, err = l.Forward(x, mode); err != nil {
			return nil, fmt.Errorf("Sequential layer %d (%T) forward: %w", i, l, err)
		}
	}
	return x, nil
}

// fusedReLU returns the ReLU right after layer i, or nil.
func (s *Sequential) fusedReLU(i int) *ReLU {
	if i+1 < len(s.Layers) {
		if r, ok := s.Layers[i+1].(*ReLU); ok {
			return r
		}
	}
	return nil
}

// Backward runs the layers' Backward in reverse order.
func (s *Sequential) Backward(dy *tensor.Dense) (*tensor.Dense, error) {
	if len(s.Layers) == 0 {
		return nil, fmt.Errorf("Sequential: no layers")
	}
	var err error
	for i := len(s.Layers) - 1; i >= 0; i-- {
		if dy, err = s.Layers[i].Backward(dy); err != nil {
			return nil, fmt.Errorf("Sequential layer %d (%T) backward: %w", i, s.Layers[i], err)
		}
	}
	return dy, nil
}

// NamedParams returns the parameters with names qualified by layer index,
// prefix + "<i>." + name (e.g. "head.0.weight"), unique as checkpoints need.
func (s *Sequential) NamedParams(prefix string) []*Param {
	var ps []*Param
	for i, l := range s.Layers {
		if sub, ok := l.(*Sequential); ok {
			ps = append(ps, sub.NamedParams(fmt.Sprintf("%s%d.", prefix, i))...)
			continue
		}
		ps = append(ps, Prefix(fmt.Sprintf("%s%d", prefix, i), l.Params())...)
	}
	return ps
}

// Params concatenates the layers' parameters in order.
func (s *Sequential) Params() []*Param {
	var ps []*Param
	for _, l := range s.Layers {
		ps = append(ps, l.Params()...)
	}
	return ps
}
