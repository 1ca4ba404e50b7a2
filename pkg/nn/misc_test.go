package nn

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gorgonia.org/tensor"
)

func TestUpsampleMatchesPyTorchExample(t *testing.T) {
	// torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
	// applied to [[1, 2], [3, 4]] (the example in PyTorch's documentation).
	x := NewDense(1, 1, 2, 2)
	copy(Data(x), []float32{1, 2, 3, 4})
	y, err := (&Upsample{Factor: 2}).Forward(x, Eval)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{
		1, 1.25, 1.75, 2,
		1.5, 1.75, 2.25, 2.5,
		2.5, 2.75, 3.25, 3.5,
		3, 3.25, 3.75, 4,
	}
	for i, v := range Data(y) {
		if v != want[i] {
			t.Fatalf("y = %v, want %v", Data(y), want)
		}
	}
}

func TestUpsampleRamp(t *testing.T) {
	// On a ramp x[j] = j the output at column i is the clamped source
	// coordinate (i + 0.5)/f − 0.5, for every factor.
	for _, f := range []int{1, 2, 3, 5} {
		const w = 7
		x := NewDense(1, 2, 3, w)
		for i := range Data(x) {
			Data(x)[i] = float32(i % w)
		}
		y, err := (&Upsample{Factor: f}).Forward(x, Eval)
		if err != nil {
			t.Fatal(err)
		}
		if got := y.Shape(); got[2] != 3*f || got[3] != w*f {
			t.Fatalf("factor %d: shape %v", f, got)
		}
		for i, v := range Data(y) {
			col := i % (w * f)
			want := math.Min(math.Max((float64(col)+0.5)/float64(f)-0.5, 0), w-1)
			if math.Abs(float64(v)-want) > 1e-6 {
				t.Fatalf("factor %d: y[%d] = %v, want %v", f, i, v, want)
			}
		}
	}
}

func TestParameterFreeGradients(t *testing.T) {
	for _, f := range []int{1, 2, 3} {
		x := randDense(testRNG(uint64(f)), -1, 1, 2, 3, 3, 4)
		checkLayerGrads(t, &Upsample{Factor: f}, x, 1e-2, defaultTol, nil)
	}
	for _, mode := range []Mode{Train, MonteCarlo} {
		d := NewDropout(0.3, nil)
		x := randDense(testRNG(5), -1, 1, 4, 10)
		// Reseed before every Forward so that each probe sees the same mask.
		prepare := func() { d.rng = rand.New(rand.NewPCG(42, uint64(mode))) }
		checkLayerGrads(t, d, x, 1e-2, defaultTol, prepare)
	}
}

func TestDropoutModes(t *testing.T) {
	const p = 0.25
	x := NewDense(200, 100)
	for i := range Data(x) {
		Data(x)[i] = 1 + float32(i%7)
	}
	d := NewDropout(p, testRNG(9))
	y, err := d.Forward(x, Eval)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range Data(y) {
		if v != Data(x)[i] {
			t.Fatal("Eval mode is not the identity")
		}
	}
	scale := float32(1) / (1 - p)
	for _, mode := range []Mode{Train, MonteCarlo} {
		y, err := d.Forward(x, mode)
		if err != nil {
			t.Fatal(err)
		}
		zeros := 0
		for i, v := range Data(y) {
			switch v {
			case 0:
				zeros++
			case Data(x)[i] * scale:
			default:
				t.Fatalf("mode %d: y[%d] = %v is neither 0 nor x/(1-p) = %v", mode, i, v, Data(x)[i]*scale)
			}
		}
		// Binomial(20000, 0.25): sd = sqrt(20000·0.25·0.75) ≈ 61; allow 5 sd.
		n := len(Data(y))
		if math.Abs(float64(zeros)-p*float64(n)) > 5*math.Sqrt(float64(n)*p*(1-p)) {
			t.Errorf("mode %d: %d of %d dropped, want about %v", mode, zeros, n, p*float64(n))
		}
		dy := NewDense(200, 100)
		for i := range Data(dy) {
			Data(dy)[i] = 1
		}
		dx, err := d.Backward(dy)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range Data(dx) {
			if (v == 0) != (Data(y)[i] == 0) {
				t.Fatalf("mode %d: gradient mask differs from forward mask at %d", mode, i)
			}
		}
	}
	// Two Train passes draw different masks (MC dropout relies on it).
	a, _ := d.Forward(x, MonteCarlo)
	first := append([]float32(nil), Data(a)...)
	b, _ := d.Forward(x, MonteCarlo)
	differ := false
	for i, v := range Data(b) {
		differ = differ || v != first[i]
	}
	if !differ {
		t.Error("consecutive MonteCarlo passes share a mask")
	}
}

func TestConcat(t *testing.T) {
	a, b := NewDense(2, 1, 2, 2), NewDense(2, 2, 2, 2)
	for i := range Data(a) {
		Data(a)[i] = float32(i)
	}
	for i := range Data(b) {
		Data(b)[i] = float32(100 + i)
	}
	var c Concat
	y, err := c.Forward([]*tensor.Dense{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if s := y.Shape(); s[0] != 2 || s[1] != 3 || s[2] != 2 || s[3] != 2 {
		t.Fatalf("shape %v", s)
	}
	want := []float32{0, 1, 2, 3, 100, 101, 102, 103, 104, 105, 106, 107,
		4, 5, 6, 7, 108, 109, 110, 111, 112, 113, 114, 115}
	for i, v := range Data(y) {
		if v != want[i] {
			t.Fatalf("y = %v, want %v", Data(y), want)
		}
	}
	// Backward of the identity-like split returns each input's slots.
	grads, err := c.Backward(y)
	if err != nil {
		t.Fatal(err)
	}
	for k, in := range []*tensor.Dense{a, b} {
		if !grads[k].Shape().Eq(in.Shape()) {
			t.Fatalf("grad %d shape %v, want %v", k, grads[k].Shape(), in.Shape())
		}
		for i, v := range Data(grads[k]) {
			if v != Data(in)[i] {
				t.Fatalf("grad %d = %v, want %v", k, Data(grads[k]), Data(in))
			}
		}
	}
	// Vectors.
	v1, v2 := NewDense(3, 2), NewDense(3, 1)
	if y, err := c.Forward([]*tensor.Dense{v1, v2}); err != nil || y.Shape()[1] != 3 {
		t.Fatalf("vector concat: %v %v", y, err)
	}
	for _, bad := range [][]*tensor.Dense{nil, {a, NewDense(2, 1, 3, 2)}, {a, NewDense(2, 4)}, {a, NewDense(1, 1, 2, 2)}} {
		if _, err := c.Forward(bad); err == nil || !strings.Contains(err.Error(), "Concat") {
			t.Errorf("inputs accepted or error lacks the layer name: %v", err)
		}
	}
	var fresh Concat
	if _, err := fresh.Backward(y); err == nil {
		t.Error("Backward before Forward accepted")
	}
}

func TestUpsampleErrors(t *testing.T) {
	if _, err := (&Upsample{Factor: 0}).Forward(NewDense(1, 1, 2, 2), Eval); err == nil || !strings.Contains(err.Error(), "Upsample") {
		t.Errorf("factor 0: %v", err)
	}
	if _, err := (&Upsample{Factor: 2}).Forward(NewDense(1, 2, 2), Eval); err == nil {
		t.Error("rank 3 accepted")
	}
	u := &Upsample{Factor: 2}
	if _, err := u.Forward(NewDense(1, 1, 2, 2), Eval); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Backward(NewDense(1, 1, 2, 2)); err == nil {
		t.Error("wrong gradient shape accepted")
	}
}

// widen2 must reproduce the table-driven interpolation exactly.
func TestWiden2MatchesTables(t *testing.T) {
	rng := testRNG(8)
	for _, w := range []int{1, 2, 3, 17, 160} {
		u := &Upsample{Factor: 2}
		halfPixelTable(w, 2, &u.colLo, &u.colHi, &u.colWt)
		sr := make([]float32, w)
		for i := range sr {
			sr[i] = rng.Float32()*200 - 100
		}
		got, want := make([]float32, 2*w), make([]float32, 2*w)
		widen2(got, sr)
		u.widen(want, sr)
		for j := range got {
			if got[j] != want[j] {
				t.Fatalf("w=%d column %d: %v, tables %v", w, j, got[j], want[j])
			}
		}
	}
}
