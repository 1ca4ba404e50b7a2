package depthnet

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/didoedge/didoedge/pkg/nn"
	"github.com/didoedge/didoedge/pkg/nn/gradcheck"
)

func TestNetGradient(t *testing.T) {
	net, err := New(Config{Height: 32, MaxDepth: 80, Width: 1, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	// Smooth activations, so that central differences do not straddle ReLU
	// kinks; the wiring (skips, concats, upsamplings) is what is under test.
	for _, seq := range []*nn.Sequential{net.Enc1, net.Enc2, net.Enc3, net.Enc4, net.Dec3, net.Dec2, net.Dec1} {
		for i, l := range seq.Layers {
			if _, ok := l.(*nn.ReLU); ok {
				seq.Layers[i] = &nn.Softplus{}
			}
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	x := nn.NewDense(2, 3, 32, 48)
	for i := range nn.Data(x) {
		nn.Data(x)[i] = float32(rng.NormFloat64())
	}
	r := make([]float32, 2*32*48)
	for i := range r {
		r[i] = float32(rng.NormFloat64())
	}
	f := func() float64 { // L = sum r_i z_i
		z, err := net.Forward(x, nn.Eval)
		if err != nil {
			t.Fatal(err)
		}
		var s float64
		for i, v := range nn.Data(z) {
			s += float64(v) * float64(r[i])
		}
		return s
	}
	f()
	nn.ZeroGrad(net.Params())
	if _, err := net.Forward(x, nn.Train); err != nil {
		t.Fatal(err)
	}
	dz := nn.NewDense(2, 1, 32, 48)
	copy(nn.Data(dz), r)
	if err := net.Backward(dz); err != nil {
		t.Fatal(err)
	}
	// The first and last layers check every path through the skips.
	for _, p := range []*nn.Param{net.Enc1.Params()[0], net.Enc4.Params()[2], net.Dec1.Params()[1], net.Head.Weight} {
		vals := nn.Data(p.Value)[:min(24, len(nn.Data(p.Value)))]
		num := gradcheck.NumericGrad(f, vals, 3e-2)
		if err := gradcheck.Check(nn.Data(p.Grad)[:len(vals)], num, gradcheck.Tolerance{Rel: 2e-2, Abs: 2e-3}); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
}

func TestBadInput(t *testing.T) {
	net, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, shape := range [][]int{{1, 3, 64, 64}, {1, 4, 192, 64}, {1, 3, 192, 40}, {3, 192, 64}} {
		if _, err := net.Forward(nn.NewDense(shape...), nn.Eval); err == nil {
			t.Errorf("shape %v accepted", shape)
		}
	}
	if err := net.Backward(nn.NewDense(1, 1, 192, 64)); err == nil {
		t.Error("Backward without Forward accepted")
	}
	for _, c := range []Config{{Height: 100, MaxDepth: 80, Width: 1}, {Height: 192, MaxDepth: 0, Width: 1}, {Height: 192, MaxDepth: 80}} {
		if _, err := New(c); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}

// TestHooks: Encode then Decode without a hook is Forward; a bottleneck
// hook changes the decoding and leaves the encoder outputs for the next
// one; HeadBackward returns the gradient of the decoder features, checked
// by finite differences of L = sum r z through the head.
func TestHooks(t *testing.T) {
	net, err := New(Config{Height: 32, MaxDepth: 80, Width: 1, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	x := nn.NewDense(1, 3, 32, 48)
	for i := range nn.Data(x) {
		nn.Data(x)[i] = float32(rng.NormFloat64())
	}
	z, err := net.Forward(x, nn.Eval)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]float32(nil), nn.Data(z)...)
	if err := net.Encode(x, nn.Eval); err != nil {
		t.Fatal(err)
	}
	zero := func(e4 *tensor.Dense) (*tensor.Dense, error) { return nn.NewDense(e4.Shape()...), nil }
	zz, err := net.Decode(nn.Eval, zero)
	if err != nil {
		t.Fatal(err)
	}
	same := true
	for i, v := range nn.Data(zz) {
		same = same && v == want[i]
	}
	if same {
		t.Fatal("a bottleneck hook that zeroes the features left the logits unchanged")
	}
	z2, err := net.Decode(nn.Eval, nil) // the encoder outputs are still there
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range nn.Data(z2) {
		if v != want[i] {
			t.Fatalf("Encode+Decode logit %d = %v, Forward %v", i, v, want[i])
		}
	}
	if s := net.DecoderFeatures().Shape(); s[1] != 16 || s[2] != 16 || s[3] != 24 {
		t.Fatalf("decoder features %v", s)
	}
	// HeadBackward against finite differences through Head and upOut.
	r := nn.NewDense(1, 1, 32, 48)
	for i := range nn.Data(r) {
		nn.Data(r)[i] = float32(rng.NormFloat64())
	}
	if _, err := net.Forward(x, nn.Train); err != nil {
		t.Fatal(err)
	}
	dec := net.DecoderFeatures().Clone().(*tensor.Dense)
	g, err := net.HeadBackward(r)
	if err != nil {
		t.Fatal(err)
	}
	grad := append([]float32(nil), nn.Data(g)...)
	up := nn.Upsample{Factor: 2}
	loss := func() float64 {
		h, err := net.Head.Forward(dec, nn.Eval)
		if err != nil {
			t.Fatal(err)
		}
		zo, err := up.Forward(h, nn.Eval)
		if err != nil {
			t.Fatal(err)
		}
		var s float64
		for i, v := range nn.Data(zo) {
			s += float64(v) * float64(nn.Data(r)[i])
		}
		return s
	}
	vals := nn.Data(dec)[:40]
	num := gradcheck.NumericGrad(loss, vals, 1e-2)
	if err := gradcheck.Check(grad[:40], num, gradcheck.Tolerance{Rel: 1e-2, Abs: 1e-4}); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Net{}).Decode(nn.Eval, nil); err == nil {
		t.Fatal("Decode without Encode accepted")
	}
}

// TestInferenceEqualsTraining checks that inference (conv+ReLU fused, the
// decoder's upsampling and concatenation read straight into the
// convolutions' planes) gives the bit patterns of a Train-mode Forward,
// which runs every layer on its own; the decoder features too.
func TestInferenceEqualsTraining(t *testing.T) {
	net, err := New(Config{Height: 48, MaxDepth: 80, Width: 1, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	x := nn.NewDense(2, 3, 48, 80)
	for i := range nn.Data(x) {
		nn.Data(x)[i] = float32(rng.NormFloat64())
	}
	z, err := net.Forward(x, nn.Train)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]float32(nil), nn.Data(z)...)
	wantDec := append([]float32(nil), nn.Data(net.DecoderFeatures())...)
	for _, mode := range []nn.Mode{nn.Eval, nn.MonteCarlo} {
		z, err := net.Forward(x, mode)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range nn.Data(z) {
			if math.Float32bits(v) != math.Float32bits(want[i]) {
				t.Fatalf("mode %d: logit %d = %v, Train-mode Forward %v", mode, i, v, want[i])
			}
		}
		for i, v := range nn.Data(net.DecoderFeatures()) {
			if math.Float32bits(v) != math.Float32bits(wantDec[i]) {
				t.Fatalf("mode %d: decoder feature %d = %v, Train-mode Forward %v", mode, i, v, wantDec[i])
			}
		}
	}
}

// TestDepthMatchesFormula checks Depth (exp 4 lanes at a time) against
// MaxDepth / (1 + math.Exp(−z)) bit for bit on logits from every range a
// network can give and beyond (±0, ±1000, ±Inf, subnormal results of exp),
// at lengths around its block of 256.
func TestDepthMatchesFormula(t *testing.T) {
	net, err := New(Config{Height: 16, MaxDepth: 80, Width: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(21, 22))
	special := []float32{0, float32(math.Copysign(0, -1)), 1000, -1000, 745, -745, 709, -709, 88, -88,
		float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, -math.MaxFloat32, 1e-30}
	for _, n := range []int{0, 1, 3, 255, 256, 257, 515, 122880} {
		z := make([]float32, n)
		for i := range z {
			switch {
			case i%11 == 0:
				z[i] = special[rng.IntN(len(special))]
			case i%3 == 0:
				z[i] = float32(rng.Float64()*1600 - 800)
			default:
				z[i] = float32(rng.NormFloat64() * 4)
			}
		}
		got := make([]float32, n)
		net.Depth(z, got)
		for i, v := range z {
			want := float32(80 / (1 + math.Exp(-float64(v))))
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("n=%d: depth of logit %v = %v, formula %v", n, v, got[i], want)
			}
		}
	}
}
