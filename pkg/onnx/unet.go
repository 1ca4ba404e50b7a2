package onnx

import (
	"fmt"
	"math/rand/v2"

	"gorgonia.org/tensor"

	"github.com/didoedge/didoedge/pkg/nn"
)

// TinyUNet is a small encoder-decoder depth network built from pkg/nn
// layers: three encoder stages (full, 1/2, 1/4 resolution), two decoder
// stages that upsample and concatenate the matching encoder skip, and a
// Softplus head giving positive metric depth. It is the representative model
// for export parity tests and runtime benchmarks, and exports its bottleneck
// as the extra "features" output the AuxUE can consume. Inference only (the
// skip wiring has no Backward).
type TinyUNet struct {
	Enc1, Enc2, Enc3 *nn.Sequential
	Up               *nn.Upsample
	Dec2, Dec1, Head *nn.Sequential

	cat2, cat1 nn.Concat
	up2        nn.Upsample
}

// NewTinyUNet builds the network with base channels (16 is a good default)
// and weights drawn from rng.
func NewTinyUNet(base int, rng *rand.Rand) (*TinyUNet, error) {
	if base < 1 {
		return nil, fmt.Errorf("tiny unet: base channels %d must be positive", base)
	}
	conv := func(in, out, stride int) (nn.Layer, error) {
		return nn.NewConv2d(nn.Conv2dConfig{In: in, Out: out, Kernel: 3, Stride: stride, Padding: 1, Bias: true}, rng)
	}
	stage := func(in, out, stride int, act nn.Layer) (*nn.Sequential, error) {
		c, err := conv(in, out, stride)
		if err != nil {
			return nil, err
		}
		return &nn.Sequential{Layers: []nn.Layer{c, act}}, nil
	}
	u := &TinyUNet{Up: &nn.Upsample{Factor: 2}, up2: nn.Upsample{Factor: 2}}
	var err error
	steps := []struct {
		dst             **nn.Sequential
		in, out, stride int
		act             nn.Layer
	}{
		{&u.Enc1, 3, base, 1, &nn.ReLU{}},
		{&u.Enc2, base, 2 * base, 2, &nn.ReLU{}},
		{&u.Enc3, 2 * base, 4 * base, 2, &nn.ReLU{}},
		{&u.Dec2, 6 * base, 2 * base, 1, &nn.ReLU{}},
		{&u.Dec1, 3 * base, base, 1, &nn.ReLU{}},
		{&u.Head, base, 1, 1, &nn.Softplus{}},
	}
	for _, s := range steps {
		if *s.dst, err = stage(s.in, s.out, s.stride, s.act); err != nil {
			return nil, fmt.Errorf("tiny unet: %w", err)
		}
	}
	return u, nil
}

// Forward returns depth (N,1,H,W) and the bottleneck features (N,4b,H/4,W/4)
// for an (N,3,H,W) input with H and W divisible by 4. The returned tensors
// are owned by the layers and overwritten by the next Forward.
func (u *TinyUNet) Forward(x *tensor.Dense) (depth, features *tensor.Dense, err error) {
	if sh := x.Shape(); len(sh) != 4 || sh[2]%4 != 0 || sh[3]%4 != 0 {
		return nil, nil, fmt.Errorf("tiny unet: input shape %v, want (N,3,H,W) with H, W divisible by 4", sh)
	}
	e1, err := u.Enc1.Forward(x, nn.Eval)
	if err != nil {
		return nil, nil, err
	}
	e2, err := u.Enc2.Forward(e1, nn.Eval)
	if err != nil {
		return nil, nil, err
	}
	e3, err := u.Enc3.Forward(e2, nn.Eval)
	if err != nil {
		return nil, nil, err
	}
	up3, err := u.Up.Forward(e3, nn.Eval)
	if err != nil {
		return nil, nil, err
	}
	c2, err := u.cat2.Forward([]*tensor.Dense{up3, e2})
	if err != nil {
		return nil, nil, err
	}
	d2, err := u.Dec2.Forward(c2, nn.Eval)
	if err != nil {
		return nil, nil, err
	}
	up2, err := u.up2.Forward(d2, nn.Eval)
	if err != nil {
		return nil, nil, err
	}
	c1, err := u.cat1.Forward([]*tensor.Dense{up2, e1})
	if err != nil {
		return nil, nil, err
	}
	d1, err := u.Dec1.Forward(c1, nn.Eval)
	if err != nil {
		return nil, nil, err
	}
	depth, err = u.Head.Forward(d1, nn.Eval)
	if err != nil {
		return nil, nil, err
	}
	return depth, e3, nil
}

// Export writes the network as an ONNX model with input "image" of the given
// shape and outputs "depth" and "features".
func (u *TinyUNet) Export(inputShape []int64) (*Model, error) {
	if len(inputShape) != 4 {
		return nil, fmt.Errorf("tiny unet export: input shape %v, want NCHW", inputShape)
	}
	b := NewBuilder("tiny_unet")
	x := Value{b.Input("image", inputShape...), 4}
	var err error
	emit := func(l nn.Layer, v Value) Value {
		if err != nil {
			return Value{}
		}
		var out Value
		out, err = EmitLayer(b, l, v)
		return out
	}
	e1 := emit(u.Enc1, x)
	e2 := emit(u.Enc2, e1)
	e3 := emit(u.Enc3, e2)
	up3 := emit(u.Up, e3)
	var c2, c1 Value
	if err == nil {
		c2, err = EmitConcat(b, up3, e2)
	}
	d2 := emit(u.Dec2, c2)
	up2 := emit(u.Up, d2)
	if err == nil {
		c1, err = EmitConcat(b, up2, e1)
	}
	d1 := emit(u.Dec1, c1)
	depth := emit(u.Head, d1)
	if err != nil {
		return nil, fmt.Errorf("tiny unet export: %w", err)
	}
	b.Rename(depth.Name, "depth")
	b.Rename(e3.Name, "features")
	b.Output("depth", 4)
	b.Output("features", 4)
	return b.Model(), nil
}
