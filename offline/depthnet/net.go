package depthnet

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gorgonia.org/tensor"

	"github.com/didoedge/didoedge/pkg/nn"
	"github.com/didoedge/didoedge/pkg/simd/batchexp"
)

// Image normalization shared by training, export and the IO spec: ImageNet
// statistics on pixels scaled to [0,1], x = (p/255 - Mean) / Std.
var (
	Mean = [3]float32{0.485, 0.456, 0.406}
	Std  = [3]float32{0.229, 0.224, 0.225}
)

// Config describes the network.
type Config struct {
	// Height is the image height the row-coordinate channel refers to (192).
	// Inputs must have exactly this height; the width is free (a multiple of
	// 16), so horizontal crops keep both the intrinsics and the row meaning.
	Height int
	// MaxDepth bounds the output: depth = MaxDepth * sigmoid(z) (BTS style).
	MaxDepth float64
	// Width multiplies every channel count (1 is the reference size).
	Width int
	// Seed draws the initial weights.
	Seed uint64
}

// DefaultConfig is the reference model: 192-row images, depth up to 80 m
// (KITTI's evaluation cap).
func DefaultConfig() Config { return Config{Height: 192, MaxDepth: 80, Width: 1, Seed: 1} }

// Net is the depth network. With c = Config.Width:
//
//	input  (N,3,H,W) normalized RGB, plus a constant row-coordinate channel
//	enc1   Conv3x3 s2 (4 -> 16c) ReLU                                  H/2
//	enc2   Conv3x3 s2 (16c -> 24c) ReLU                                H/4
//	enc3   Conv3x3 s2 (24c -> 32c) ReLU, Conv3x3 (32c -> 32c) ReLU     H/8
//	enc4   Conv3x3 s2 (32c -> 48c) ReLU, Conv3x3 dil 2 (48c) ReLU      H/16
//	dec3   Conv3x3 on [up2(enc4), enc3] -> 32c ReLU                    H/8
//	dec2   Conv3x3 on [up2(dec3), enc2] -> 24c ReLU                    H/4
//	dec1   Conv3x3 on [up2(dec2), enc1] -> 16c ReLU                    H/2
//	head   Conv3x3 (16c -> 1), bilinear up2, depth = MaxDepth*sigmoid  H
//
// The row coordinate (2(v+0.5)/Height - 1) lets a small network use the
// strongest monocular cue of a fixed forward camera, the image row of the
// ground contact point, without learning it from zero padding.
type Net struct {
	Config                 Config
	Enc1, Enc2, Enc3, Enc4 *nn.Sequential
	Dec3, Dec2, Dec1       *nn.Sequential
	Head                   *nn.Conv2d

	up4, up3, up2, upOut nn.Upsample
	cat3, cat2, cat1     nn.Concat

	// scratch reused while shapes stay the same
	in, logit      *tensor.Dense
	gE1, gE2, gE3  *tensor.Dense
	e1, e2, e3, e4 *tensor.Dense // encoder outputs of the last Encode
	dec1           *tensor.Dense // last decoder features of the last Decode
	haveEncode     bool
	haveForward    bool
	lastN, lastW   int
	coordRow       []float32
	named          []*nn.Param
}

// New builds the network with weights drawn from cfg.Seed.
func New(cfg Config) (*Net, error) {
	if cfg.Height < 16 || cfg.Height%16 != 0 {
		return nil, fmt.Errorf("depthnet: height %d must be a positive multiple of 16", cfg.Height)
	}
	if !(cfg.MaxDepth > 0) || math.IsInf(cfg.MaxDepth, 0) {
		return nil, fmt.Errorf("depthnet: max depth %v must be positive and finite", cfg.MaxDepth)
	}
	if cfg.Width < 1 {
		return nil, fmt.Errorf("depthnet: width multiplier %d must be at least 1", cfg.Width)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x64657074))
	c := cfg.Width
	var err error
	conv := func(in, out, stride, dil int) nn.Layer {
		if err != nil {
			return nil
		}
		var l *nn.Conv2d
		l, err = nn.NewConv2d(nn.Conv2dConfig{In: in, Out: out, Kernel: 3, Stride: stride, Padding: dil, Dilation: dil, Bias: true}, rng)
		return l
	}
	seq := func(ls ...nn.Layer) *nn.Sequential { return &nn.Sequential{Layers: ls} }
	n := &Net{Config: cfg,
		up4: nn.Upsample{Factor: 2}, up3: nn.Upsample{Factor: 2}, up2: nn.Upsample{Factor: 2}, upOut: nn.Upsample{Factor: 2}}
	n.Enc1 = seq(conv(4, 16*c, 2, 1), &nn.ReLU{})
	n.Enc2 = seq(conv(16*c, 24*c, 2, 1), &nn.ReLU{})
	n.Enc3 = seq(conv(24*c, 32*c, 2, 1), &nn.ReLU{}, conv(32*c, 32*c, 1, 1), &nn.ReLU{})
	n.Enc4 = seq(conv(32*c, 48*c, 2, 1), &nn.ReLU{}, conv(48*c, 48*c, 1, 2), &nn.ReLU{})
	n.Dec3 = seq(conv(80*c, 32*c, 1, 1), &nn.ReLU{})
	n.Dec2 = seq(conv(56*c, 24*c, 1, 1), &nn.ReLU{})
	n.Dec1 = seq(conv(40*c, 16*c, 1, 1), &nn.ReLU{})
	head := conv(16*c, 1, 1, 1)
	if err != nil {
		return nil, fmt.Errorf("depthnet: %w", err)
	}
	n.Head = head.(*nn.Conv2d)
	// Start near a plausible mean depth (about 15 m) so early steps are sane.
	nn.Data(n.Head.Bias.Value)[0] = float32(-math.Log(cfg.MaxDepth/15 - 1))
	for _, p := range []struct {
		name string
		l    nn.Layer
	}{{"enc1", n.Enc1}, {"enc2", n.Enc2}, {"enc3", n.Enc3}, {"enc4", n.Enc4},
		{"dec3", n.Dec3}, {"dec2", n.Dec2}, {"dec1", n.Dec1}} {
		n.named = append(n.named, p.l.(*nn.Sequential).NamedParams(p.name+".")...)
	}
	n.named = append(n.named, nn.Prefix("head.", n.Head.Params())...)
	return n, nil
}

// SetWorkers sets how many goroutines each convolution splits its passes
// across (nn.Conv2d.SetWorkers; n < 1: GOMAXPROCS). The outputs do not depend
// on it.
func (n *Net) SetWorkers(workers int) {
	nn.SetWorkers(workers, n.Enc1, n.Enc2, n.Enc3, n.Enc4, n.Dec3, n.Dec2, n.Dec1, n.Head)
}

// Params lists every trainable parameter with a unique checkpoint name.
func (n *Net) Params() []*nn.Param { return n.named }

// RowCoordinate is the value of the coordinate channel on image row v.
func RowCoordinate(v, height int) float32 {
	return float32(2*(float64(v)+0.5)/float64(height) - 1)
}

// prepare validates x and writes the 4-channel network input.
func (n *Net) prepare(x *tensor.Dense) (*tensor.Dense, error) {
	if x == nil {
		return nil, fmt.Errorf("depthnet: nil input")
	}
	s := x.Shape()
	if len(s) != 4 || s[1] != 3 || s[2] != n.Config.Height || s[3] < 16 || s[3]%16 != 0 {
		return nil, fmt.Errorf("depthnet: input shape %v, want (N,3,%d,W) with W a positive multiple of 16", s, n.Config.Height)
	}
	N, H, W := s[0], s[2], s[3]
	if n.in == nil || n.lastN != N || n.lastW != W {
		n.in = nn.NewDense(N, 4, H, W)
		n.lastN, n.lastW = N, W
	}
	src, dst := nn.Data(x), nn.Data(n.in)
	hw := H * W
	for i := 0; i < N; i++ {
		copy(dst[i*4*hw:i*4*hw+3*hw], src[i*3*hw:(i+1)*3*hw])
		c := dst[i*4*hw+3*hw : (i+1)*4*hw]
		for v := 0; v < H; v++ {
			val := RowCoordinate(v, H)
			row := c[v*W : (v+1)*W]
			for u := range row {
				row[u] = val
			}
		}
	}
	return n.in, nil
}

// Forward maps normalized images (N,3,Height,W) to the pre-sigmoid logits
// z (N,1,Height,W); depth = MaxDepth*sigmoid(z) (see Depth). mode Train caches
// activations for Backward. The returned tensor is owned by the network.
// It is Encode followed by Decode without a bottleneck hook.
func (n *Net) Forward(x *tensor.Dense, mode nn.Mode) (*tensor.Dense, error) {
	if err := n.Encode(x, mode); err != nil {
		return nil, err
	}
	return n.Decode(mode, nil)
}

// Encode runs the encoder on x and keeps its outputs for Decode, so that
// several decodings (dropout samples at the bottleneck) share one encoder
// pass.
func (n *Net) Encode(x *tensor.Dense, mode nn.Mode) error {
	n.haveForward, n.haveEncode = false, false
	in, err := n.prepare(x)
	if err != nil {
		return err
	}
	if n.e1, err = n.Enc1.Forward(in, mode); err != nil {
		return fmt.Errorf("depthnet enc1: %w", err)
	}
	if n.e2, err = n.Enc2.Forward(n.e1, mode); err != nil {
		return fmt.Errorf("depthnet enc2: %w", err)
	}
	if n.e3, err = n.Enc3.Forward(n.e2, mode); err != nil {
		return fmt.Errorf("depthnet enc3: %w", err)
	}
	if n.e4, err = n.Enc4.Forward(n.e3, mode); err != nil {
		return fmt.Errorf("depthnet enc4: %w", err)
	}
	n.haveEncode = true
	return nil
}

// Bottleneck transforms the deepest encoder features before the decoder
// (e.g. dropout injected in Monte-Carlo mode); it must not modify its
// input, which later decodings reuse.
type Bottleneck func(e4 *tensor.Dense) (*tensor.Dense, error)

// Decode runs the decoder and the head on the outputs of the last Encode,
// with the bottleneck hook applied to the deepest features when non-nil,
// and returns the logits (owned by the network). The last decoder features
// stay available through DecoderFeatures.
func (n *Net) Decode(mode nn.Mode, hook Bottleneck) (*tensor.Dense, error) {
	n.haveForward = false
	if !n.haveEncode {
		return nil, fmt.Errorf("depthnet: Decode without Encode")
	}
	e4 := n.e4
	if hook != nil {
		var err error
		if e4, err = hook(e4); err != nil {
			return nil, fmt.Errorf("depthnet bottleneck: %w", err)
		}
	}
	d, err := n.decode(n.Dec3, &n.up4, &n.cat3, e4, n.e3, mode)
	if err != nil {
		return nil, fmt.Errorf("depthnet dec3: %w", err)
	}
	if d, err = n.decode(n.Dec2, &n.up3, &n.cat2, d, n.e2, mode); err != nil {
		return nil, fmt.Errorf("depthnet dec2: %w", err)
	}
	if d, err = n.decode(n.Dec1, &n.up2, &n.cat1, d, n.e1, mode); err != nil {
		return nil, fmt.Errorf("depthnet dec1: %w", err)
	}
	n.dec1 = d
	z, err := n.Head.Forward(d, mode)
	if err != nil {
		return nil, fmt.Errorf("depthnet head: %w", err)
	}
	if z, err = n.upOut.Forward(z, mode); err != nil {
		return nil, fmt.Errorf("depthnet output upsample: %w", err)
	}
	n.logit = z
	n.haveForward = true
	return z, nil
}

// DecoderFeatures returns the last decoder features of the last Decode
// (N,16c,Height/2,W/2), owned by the network.
func (n *Net) DecoderFeatures() *tensor.Dense { return n.dec1 }

// HeadBackward propagates dLoss/dz of the last Forward (in Train mode)
// through the output upsampling and the head only, accumulating the head's
// parameter gradients, and returns the gradient of the last decoder
// features (a training-free gradient score reads it).
func (n *Net) HeadBackward(dz *tensor.Dense) (*tensor.Dense, error) {
	if !n.haveForward {
		return nil, fmt.Errorf("depthnet: HeadBackward without Forward")
	}
	if dz == nil || !dz.Shape().Eq(n.logit.Shape()) {
		return nil, fmt.Errorf("depthnet: gradient shape does not match the output %v", n.logit.Shape())
	}
	g, err := n.upOut.Backward(dz)
	if err != nil {
		return nil, fmt.Errorf("depthnet output upsample backward: %w", err)
	}
	if g, err = n.Head.Backward(g); err != nil {
		return nil, fmt.Errorf("depthnet head backward: %w", err)
	}
	return g, nil
}

func (n *Net) decode(dec *nn.Sequential, up *nn.Upsample, cat *nn.Concat, low, skip *tensor.Dense, mode nn.Mode) (*tensor.Dense, error) {
	if mode != nn.Train {
		// The same values without the upsampled and concatenated tensors
		// (their Backward is never needed outside training).
		return dec.ForwardConcat(mode, nn.ConvInput{X: low, Up: up}, nn.ConvInput{X: skip})
	}
	u, err := up.Forward(low, mode)
	if err != nil {
		return nil, err
	}
	c, err := cat.Forward([]*tensor.Dense{u, skip})
	if err != nil {
		return nil, err
	}
	return dec.Forward(c, mode)
}

// decodeBackward propagates dy through dec, cat and up; it returns the
// gradient of the low-resolution input and of the skip (owned by cat).
func decodeBackward(dec *nn.Sequential, up *nn.Upsample, cat *nn.Concat, dy *tensor.Dense) (dLow, dSkip *tensor.Dense, err error) {
	dc, err := dec.Backward(dy)
	if err != nil {
		return nil, nil, err
	}
	parts, err := cat.Backward(dc)
	if err != nil {
		return nil, nil, err
	}
	if dLow, err = up.Backward(parts[0]); err != nil {
		return nil, nil, err
	}
	return dLow, parts[1], nil
}

// addInto stores a+b in *buf (reused while the shape holds) and returns it.
func addInto(buf **tensor.Dense, a, b *tensor.Dense) *tensor.Dense {
	if *buf == nil || !(*buf).Shape().Eq(a.Shape()) {
		*buf = nn.NewDense(a.Shape()...)
	}
	dst, x, y := nn.Data(*buf), nn.Data(a), nn.Data(b)
	for i := range dst {
		dst[i] = x[i] + y[i]
	}
	return *buf
}

// Backward takes dLoss/dz for the last Forward's logits and accumulates the
// parameter gradients.
func (n *Net) Backward(dz *tensor.Dense) error {
	if !n.haveForward {
		return fmt.Errorf("depthnet: Backward without Forward")
	}
	g, err := n.HeadBackward(dz)
	if err != nil {
		return err
	}
	dD2, dE1, err := decodeBackward(n.Dec1, &n.up2, &n.cat1, g)
	if err != nil {
		return fmt.Errorf("depthnet dec1 backward: %w", err)
	}
	dD3, dE2, err := decodeBackward(n.Dec2, &n.up3, &n.cat2, dD2)
	if err != nil {
		return fmt.Errorf("depthnet dec2 backward: %w", err)
	}
	dE4, dE3, err := decodeBackward(n.Dec3, &n.up4, &n.cat3, dD3)
	if err != nil {
		return fmt.Errorf("depthnet dec3 backward: %w", err)
	}
	// Each encoder output feeds the next encoder and a decoder skip: the
	// gradients add (the skip parts are owned by the Concats, the encoder
	// parts by the encoders, the sums by the network).
	g4, err := n.Enc4.Backward(dE4)
	if err != nil {
		return fmt.Errorf("depthnet enc4 backward: %w", err)
	}
	g3, err := n.Enc3.Backward(addInto(&n.gE3, dE3, g4))
	if err != nil {
		return fmt.Errorf("depthnet enc3 backward: %w", err)
	}
	g2, err := n.Enc2.Backward(addInto(&n.gE2, dE2, g3))
	if err != nil {
		return fmt.Errorf("depthnet enc2 backward: %w", err)
	}
	if _, err := n.Enc1.Backward(addInto(&n.gE1, dE1, g2)); err != nil {
		return fmt.Errorf("depthnet enc1 backward: %w", err)
	}
	return nil
}

// Depth converts logits to metric depth: MaxDepth * sigmoid(z) =
// MaxDepth / (1 + exp(−z)), into dst. The sums 1 + exp(−z) come from
// batchexp.AddExpPlusOne on −z (4 lanes at a time) added to zeros: 0 + (e + 1)
// is e + 1, which is 1 + e, so the bits are those of the scalar formula
// (TestDepthMatchesFormula).
func (n *Net) Depth(z []float32, dst []float32) {
	m := n.Config.MaxDepth
	var neg [depthBlock]float32
	var sum [depthBlock]float64
	for j0 := 0; j0 < len(z); j0 += depthBlock {
		zb := z[j0:min(j0+depthBlock, len(z))]
		nb, sb := neg[:len(zb)], sum[:len(zb)]
		for i, v := range zb {
			nb[i] = -v // float64(−v) is −float64(v)
		}
		clear(sb)
		batchexp.AddExpPlusOne(sb, nb, math.Inf(1))
		d := dst[j0 : j0+len(zb)]
		for i, t := range sb {
			d[i] = float32(m / t)
		}
	}
}

// depthBlock is the number of logits Depth converts per step (its scratch
// lives on the stack).
const depthBlock = 256
