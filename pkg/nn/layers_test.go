package nn

import (
	"math"
	"strings"
	"testing"

	"gorgonia.org/tensor"
)

func TestLinearForwardClosedForm(t *testing.T) {
	l := NewLinear(3, 2, testRNG(1))
	copy(Data(l.Weight.Value), []float32{1, 2, 3, -1, 0, 1})
	copy(Data(l.Bias.Value), []float32{0.5, -0.5})
	x := NewDense(2, 3)
	copy(Data(x), []float32{1, 1, 1, 2, 0, -1})
	y, err := l.Forward(x, Eval)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{6.5, -0.5, 2 - 3 + 0.5, -2 - 1 - 0.5}
	for i, v := range Data(y) {
		if v != want[i] {
			t.Fatalf("y = %v, want %v", Data(y), want)
		}
	}
}

func TestLayerGradients(t *testing.T) {
	tests := []struct {
		name  string
		layer func() Layer
		shape []int
		lo    float32
		hi    float32
	}{
		{"linear", func() Layer { return NewLinear(5, 4, testRNG(2)) }, []int{3, 5}, -1, 1},
		{"linear 1x1", func() Layer { return NewLinear(1, 1, testRNG(3)) }, []int{1, 1}, -1, 1},
		{"relu", func() Layer { return &ReLU{} }, []int{4, 6}, -1, 1},
		{"exp", func() Layer { return NewExp() }, []int{2, 3, 2, 2}, -2, 2},
		{"exp clamped", func() Layer { return &Exp{Clamp: 0.5} }, []int{3, 7}, -1, 1},
		{"softplus", func() Layer { return &Softplus{} }, []int{2, 9}, -5, 5},
		{"cosine vectors", func() Layer { return NewCosineSimilarity(6, 4, testRNG(4)) }, []int{3, 6}, -1, 1},
		{"cosine pixels", func() Layer { return NewCosineSimilarity(5, 3, testRNG(5)) }, []int{2, 5, 3, 4}, -1, 1},
		{"global context", func() Layer { return &GlobalContext{} }, []int{2, 3, 3, 4}, -1, 1},
		{"global context 3 bands", func() Layer { return &GlobalContext{Bands: 3} }, []int{2, 2, 6, 4}, -1, 1},
		{"global context into cosine", func() Layer {
			return &Sequential{Layers: []Layer{&GlobalContext{}, NewCosineSimilarity(6, 3, testRNG(9))}}
		}, []int{2, 3, 2, 5}, -1, 1},
		{"sequential", func() Layer {
			return &Sequential{Layers: []Layer{
				NewCosineSimilarity(4, 6, testRNG(6)), NewLinear(6, 5, testRNG(7)), &ReLU{},
				NewLinear(5, 3, testRNG(8)), NewExp(),
			}}
		}, []int{3, 4}, -1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := randDense(testRNG(11), tc.lo, tc.hi, tc.shape...)
			if tc.name == "relu" || tc.name == "exp clamped" {
				// Keep inputs off the kink so that ±eps does not cross it.
				for i, v := range Data(x) {
					if v > -0.05 && v < 0.05 || (tc.name == "exp clamped" && math.Abs(float64(v)-0.5) < 0.05) {
						Data(x)[i] = v + 0.2
					}
				}
			}
			eps := 1e-2
			if tc.name == "sequential" {
				eps = 1e-3 // the inner ReLU sees pre-activations near 0; keep probes off the kink
			}
			checkLayerGrads(t, tc.layer(), x, eps, defaultTol, nil)
		})
	}
}

// GlobalContext keeps the input and appends each image's channel means:
// hand-computed on a (2, 2, 1, 3) input.
func TestGlobalContextClosedForm(t *testing.T) {
	x := NewDense(2, 2, 1, 3)
	copy(Data(x), []float32{1, 2, 6, -3, 0, 3, 10, 10, 10, 0, 0, 0.5})
	y, err := (&GlobalContext{}).Forward(x, Eval)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{1, 2, 6, -3, 0, 3, 3, 3, 3, 0, 0, 0,
		10, 10, 10, 0, 0, 0.5, 10, 10, 10, 1.0 / 6, 1.0 / 6, 1.0 / 6}
	if !y.Shape().Eq(tensor.Shape{2, 4, 1, 3}) {
		t.Fatalf("shape %v, want (2, 4, 1, 3)", y.Shape())
	}
	for i, v := range Data(y) {
		if math.Abs(float64(v-want[i])) > 1e-6 {
			t.Fatalf("GlobalContext element %d = %v, want %v (all: %v)", i, v, want[i], Data(y))
		}
	}
}

// With bands, channel C + c*B + b holds the mean of channel c over the
// rows of band b: hand-computed on a (1, 2, 4, 2) input in 2 bands.
func TestGlobalContextBandsClosedForm(t *testing.T) {
	x := NewDense(1, 2, 4, 2)
	copy(Data(x), []float32{1, 3, 5, 7, 0, 0, 2, 2, 4, 4, 4, 4, -1, 1, 9, 9})
	y, err := (&GlobalContext{Bands: 2}).Forward(x, Eval)
	if err != nil {
		t.Fatal(err)
	}
	if !y.Shape().Eq(tensor.Shape{1, 6, 4, 2}) {
		t.Fatalf("shape %v, want (1, 6, 4, 2)", y.Shape())
	}
	// channel 0: rows 0-1 mean 4, rows 2-3 mean 1; channel 1: rows 0-1 mean 4, rows 2-3 mean 4.5.
	for k, want := range []float32{4, 1, 4, 4.5} {
		for i, v := range Data(y)[(2+k)*8 : (3+k)*8] {
			if math.Abs(float64(v-want)) > 1e-6 {
				t.Fatalf("context channel %d element %d = %v, want %v", 2+k, i, v, want)
			}
		}
	}
	if _, err := (&GlobalContext{Bands: 3}).Forward(x, Eval); err == nil || !strings.Contains(err.Error(), "multiple of 3 bands") {
		t.Fatalf("height 4 in 3 bands: %v", err)
	}
}

func TestExpClampAndSoftplusStability(t *testing.T) {
	x := NewDense(5)
	copy(Data(x), []float32{-200, 0, 80, 88.8, 1e30})
	y, err := NewExp().Forward(x, Eval)
	if err != nil {
		t.Fatal(err)
	}
	e80 := float32(math.Exp(80))
	want := []float32{0, 1, e80, e80, e80}
	for i, v := range Data(y) {
		if v != want[i] || math.IsInf(float64(v), 0) {
			t.Errorf("exp(%v) = %v, want %v", Data(x)[i], v, want[i])
		}
	}
	sp := &Softplus{}
	copy(Data(x), []float32{-200, -30, 0, 30, 1e30})
	y, err = sp.Forward(x, Train)
	if err != nil {
		t.Fatal(err)
	}
	wantSP := []float64{math.Exp(-200), math.Exp(-30), math.Ln2, 30, 1e30}
	for i, v := range Data(y) {
		if w := float64(float32(wantSP[i])); math.Abs(float64(v)-w) > 1e-6*math.Abs(w) {
			t.Errorf("softplus(%v) = %v, want %v", Data(x)[i], v, wantSP[i])
		}
	}
	dy := NewDense(5)
	copy(Data(dy), []float32{1, 1, 1, 1, 1})
	dx, err := sp.Backward(dy)
	if err != nil {
		t.Fatal(err)
	}
	wantD := []float64{0, math.Exp(-30), 0.5, 1, 1}
	for i, v := range Data(dx) {
		if math.Abs(float64(v)-wantD[i]) > 1e-7 || math.IsNaN(float64(v)) {
			t.Errorf("softplus'(%v) = %v, want %v", Data(x)[i], v, wantD[i])
		}
	}
}

func TestCosineSimilarityClosedForm(t *testing.T) {
	c := NewCosineSimilarity(2, 2, testRNG(1))
	copy(Data(c.Weight.Value), []float32{3, 4, 0, -2}) // rows: (3,4), (0,-2)
	x := NewDense(2, 2)
	copy(Data(x), []float32{3, 4, 1, 0})
	y, err := c.Forward(x, Eval)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{1, -0.8, 0.6, 0}
	for i, v := range Data(y) {
		if math.Abs(float64(v)-want[i]) > 1e-6 {
			t.Fatalf("cosine = %v, want %v", Data(y), want)
		}
	}
	// A zero input gives 0 and a finite gradient.
	clear32(Data(x))
	if _, err := c.Forward(x, Train); err != nil {
		t.Fatal(err)
	}
	dx, err := c.Backward(NewDense(2, 2))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range Data(dx) {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("non-finite gradient at zero input: %v", Data(dx))
		}
	}
}

func TestLayerErrors(t *testing.T) {
	lin := NewLinear(3, 2, testRNG(1))
	cos := NewCosineSimilarity(3, 2, testRNG(1))
	tests := []struct {
		name  string
		run   func() error
		inErr string
	}{
		{"linear backward before forward", func() error { _, err := lin.Backward(NewDense(1, 2)); return err }, "without a preceding Forward"},
		{"linear wrong features", func() error { _, err := lin.Forward(NewDense(2, 4), Train); return err }, "Linear(3->2)"},
		{"linear wrong rank", func() error { _, err := lin.Forward(NewDense(2, 3, 1), Train); return err }, "rank"},
		{"linear nil", func() error { _, err := lin.Forward(nil, Train); return err }, "nil input"},
		{"linear float64", func() error {
			_, err := lin.Forward(tensor.New(tensor.WithShape(1, 3), tensor.WithBacking([]float64{1, 2, 3})), Train)
			return err
		}, "dtype"},
		{"linear grad shape", func() error {
			if _, err := lin.Forward(NewDense(2, 3), Train); err != nil {
				return err
			}
			_, err := lin.Backward(NewDense(3, 2))
			return err
		}, "does not match"},
		{"cosine channels", func() error { _, err := cos.Forward(NewDense(1, 4, 2, 2), Train); return err }, "CosineSimilarity"},
		{"relu backward first", func() error { _, err := (&ReLU{}).Backward(NewDense(1)); return err }, "ReLU"},
		{"sequential empty", func() error { _, err := (&Sequential{}).Forward(NewDense(1), Train); return err }, "no layers"},
		{"sequential names layer", func() error {
			s := &Sequential{Layers: []Layer{&ReLU{}, lin}}
			_, err := s.Forward(NewDense(2, 5), Train)
			return err
		}, "layer 1"},
		{"dropout p", func() error { _, err := NewDropout(1, nil).Forward(NewDense(2), Train); return err }, "probability"},
		{"global context on vectors", func() error { _, err := (&GlobalContext{}).Forward(NewDense(2, 3), Train); return err }, "GlobalContext"},
		{"global context backward first", func() error { _, err := (&GlobalContext{}).Backward(NewDense(1, 2, 1, 1)); return err }, "without a preceding Forward"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil || !strings.Contains(err.Error(), tc.inErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.inErr)
			}
		})
	}
}

func TestBufferReuse(t *testing.T) {
	l := NewLinear(4, 3, testRNG(1))
	x := randDense(testRNG(2), -1, 1, 5, 4)
	y1, _ := l.Forward(x, Train)
	y2, _ := l.Forward(x, Train)
	if y1 != y2 {
		t.Error("Linear output buffer not reused for an unchanged shape")
	}
	y3, _ := l.Forward(randDense(testRNG(2), -1, 1, 6, 4), Train)
	if y3 == y1 || y3.Shape()[0] != 6 {
		t.Errorf("new shape %v not honoured", y3.Shape())
	}
	s := &Sequential{Layers: []Layer{NewCosineSimilarity(4, 8, testRNG(3)), &ReLU{}, NewLinear(8, 2, testRNG(4)), NewExp()}}
	dy := NewDense(5, 2)
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := s.Forward(x, Train); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Backward(dy); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Errorf("steady-state forward+backward allocates %v times per call", allocs)
	}
	img := &Sequential{Layers: []Layer{
		mustConv(Conv2dConfig{In: 3, Out: 4, Kernel: 3, Padding: 1}), &Softplus{}, NewDropout(0.2, testRNG(5)),
		&Upsample{Factor: 2}, &GlobalContext{}, NewCosineSimilarity(8, 2, testRNG(6)),
	}}
	xi := randDense(testRNG(7), -1, 1, 2, 3, 6, 8)
	dyi := NewDense(2, 2, 12, 16)
	var cat Concat
	allocs = testing.AllocsPerRun(20, func() {
		if _, err := img.Forward(xi, Train); err != nil {
			t.Fatal(err)
		}
		if _, err := img.Backward(dyi); err != nil {
			t.Fatal(err)
		}
		y, err := cat.Forward([]*tensor.Dense{xi, xi})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cat.Backward(y); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Errorf("steady-state image pipeline allocates %v times per call", allocs)
	}
}

func TestEditedConfigIsAnError(t *testing.T) {
	l := NewLinear(3, 2, testRNG(1))
	l.In = 4
	if _, err := l.Forward(NewDense(1, 4), Train); err == nil || !strings.Contains(err.Error(), "weight") {
		t.Errorf("Linear with stale weight: %v", err)
	}
	c := mustConv(Conv2dConfig{In: 2, Out: 3, Kernel: 3, Padding: 1})
	if _, err := c.Forward(NewDense(1, 2, 5, 5), Train); err != nil {
		t.Fatal(err)
	}
	c.Config.Kernel = 5
	if _, err := c.Forward(NewDense(1, 2, 5, 5), Train); err == nil || !strings.Contains(err.Error(), "Conv2d") {
		t.Errorf("Conv2d with stale weight: %v", err)
	}
	c.Config.Kernel, c.Config.Bias = 3, true
	if _, err := c.Forward(NewDense(1, 2, 5, 5), Train); err == nil || !strings.Contains(err.Error(), "Bias") {
		t.Errorf("Conv2d bias flag without parameter: %v", err)
	}
}
