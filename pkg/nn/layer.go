package nn

import "gorgonia.org/tensor"

// Mode selects how stochastic layers behave in a forward pass.
type Mode int

const (
	// Eval is deterministic inference: dropout is the identity.
	Eval Mode = iota
	// Train enables dropout and caches activations for Backward.
	Train
	// MonteCarlo keeps dropout active at inference (MC dropout sampling).
	MonteCarlo
)

// Param is a trainable tensor and its accumulated gradient (same shape).
type Param struct {
	Name  string
	Value *tensor.Dense
	Grad  *tensor.Dense
}

// Layer is a differentiable map from one tensor to one tensor.
type Layer interface {
	// Forward computes the output and caches what Backward needs.
	Forward(x *tensor.Dense, mode Mode) (*tensor.Dense, error)
	// Backward takes dLoss/dOutput of the last Forward, accumulates parameter
	// gradients into Param.Grad and returns dLoss/dInput.
	Backward(dy *tensor.Dense) (*tensor.Dense, error)
	// Params lists the trainable parameters (nil for parameter-free layers).
	Params() []*Param
}
