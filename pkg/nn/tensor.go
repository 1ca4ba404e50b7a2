package nn

import (
	"fmt"

	"gorgonia.org/tensor"
)

// NewDense returns a zeroed float32 tensor of the given shape.
func NewDense(shape ...int) *tensor.Dense {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(make([]float32, n)))
}

// Data returns the backing slice of a float32 tensor without copying or
// allocating (Dense.Data goes through reflection and allocates on every call).
// It returns nil for a nil tensor or one of another dtype.
func Data(t *tensor.Dense) []float32 {
	if t == nil || t.Dtype() != tensor.Float32 {
		return nil
	}
	return t.Float32s()
}

// reuse returns *buf when it already has the wanted shape, otherwise a fresh
// zeroed tensor stored in *buf. Layers keep their outputs and gradients in such
// buffers so that steady-state training allocates nothing. The contents are
// stale on reuse; callers overwrite or clear them.
func reuse(buf **tensor.Dense, shape ...int) *tensor.Dense {
	if *buf != nil && sameShape((*buf).Shape(), shape) {
		return *buf
	}
	// Copy the shape so that the variadic slice does not escape (and allocate) on reuse.
	*buf = NewDense(append([]int(nil), shape...)...)
	return *buf
}

func sameShape(a tensor.Shape, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// named is implemented by every layer; the name is built only for errors, so
// that the hot path does not format strings.
type named interface{ name() string }

// checkInput verifies that x is a float32 tensor of the given rank and returns
// its backing slice; the error names the layer.
func checkInput(l named, x *tensor.Dense, ranks ...int) ([]float32, error) {
	if x == nil {
		layer := l.name()
		return nil, fmt.Errorf("%s: nil input", layer)
	}
	if x.Dtype() != tensor.Float32 {
		layer := l.name()
		return nil, fmt.Errorf("%s: input dtype %v, want float32", layer, x.Dtype())
	}
	if !x.IsNativelyAccessible() || x.RequiresIterator() {
		layer := l.name()
		return nil, fmt.Errorf("%s: input must be a contiguous tensor", layer)
	}
	r := len(x.Shape())
	for _, want := range ranks {
		if r == want {
			return x.Float32s(), nil
		}
	}
	return nil, fmt.Errorf("%s: input shape %v has rank %d, want rank %v", l.name(), x.Shape(), r, append([]int(nil), ranks...))
}

// checkGrad verifies that dy matches the shape of the last forward output.
func checkGrad(l named, dy *tensor.Dense, out tensor.Shape, haveForward bool) ([]float32, error) {
	if !haveForward {
		layer := l.name()
		return nil, fmt.Errorf("%s: Backward called without a preceding Forward", layer)
	}
	if dy == nil {
		layer := l.name()
		return nil, fmt.Errorf("%s: nil output gradient", layer)
	}
	if dy.Dtype() != tensor.Float32 {
		layer := l.name()
		return nil, fmt.Errorf("%s: output gradient dtype %v, want float32", layer, dy.Dtype())
	}
	if !dy.Shape().Eq(out) {
		layer := l.name()
		return nil, fmt.Errorf("%s: output gradient shape %v does not match forward output %v", layer, dy.Shape(), out)
	}
	return dy.Float32s(), nil
}

func clear32(s []float32) {
	for i := range s {
		s[i] = 0
	}
}

// checkParam verifies that a parameter still has the shape the layer's
// configuration implies (the fields are exported and could be edited).
func checkParam(l named, p *Param, shape ...int) error {
	if p == nil || p.Value == nil || p.Grad == nil {
		return fmt.Errorf("%s: parameter is nil", l.name())
	}
	if p.Value.Dtype() != tensor.Float32 || p.Grad.Dtype() != tensor.Float32 ||
		!sameShape(p.Value.Shape(), shape) || !sameShape(p.Grad.Shape(), shape) {
		return fmt.Errorf("%s: parameter %q has shape %v (gradient %v), want float32 %v",
			l.name(), p.Name, p.Value.Shape(), p.Grad.Shape(), append([]int(nil), shape...))
	}
	return nil
}
