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
func (s *Sequential) Forward(x *tensor.Dense, mode Mode) (*tensor.Dense, error) {
	if len(s.Layers) == 0 {
		return nil, fmt.Errorf("Sequential: no layers")
	}
	var err error
	for i, l := range s.Layers {
		if x, err = l.Forward(x, mode); err != nil {
			return nil, fmt.Errorf("Sequential layer %d (%T) forward: %w", i, l, err)
		}
	}
	return x, nil
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
