package nn

import (
	"math"
	"testing"
)

func TestAdamClosedForm(t *testing.T) {
	tests := []struct {
		name string
		cfg  AdamConfig
	}{
		{"adam", AdamConfig{}},
		{"adam l2", AdamConfig{Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, WeightDecay: 0.1}},
		{"adamw", AdamConfig{WeightDecay: 0.1, Decoupled: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newParam("w", 4)
			w0 := []float64{0.5, -1, 2, 0}
			grads := [][]float64{{0.1, -2, 0, 3}, {-0.3, 1, 0.5, 3}}
			for i, v := range w0 {
				Data(p.Value)[i] = float32(v)
			}
			opt := NewAdam([]*Param{p}, tc.cfg)
			c := opt.Config()
			lr := 0.01
			// Reference recurrence in float64.
			w := append([]float64(nil), w0...)
			m, v := make([]float64, 4), make([]float64, 4)
			for step, g := range grads {
				for i := range g {
					Data(p.Grad)[i] = float32(g[i])
				}
				if err := opt.Step(lr); err != nil {
					t.Fatal(err)
				}
				tt := float64(step + 1)
				for i := range w {
					gi := g[i]
					if c.Decoupled {
						w[i] *= 1 - lr*c.WeightDecay
					} else {
						gi += c.WeightDecay * w[i]
					}
					m[i] = c.Beta1*m[i] + (1-c.Beta1)*gi
					v[i] = c.Beta2*v[i] + (1-c.Beta2)*gi*gi
					mh, vh := m[i]/(1-math.Pow(c.Beta1, tt)), v[i]/(1-math.Pow(c.Beta2, tt))
					w[i] -= lr * mh / (math.Sqrt(vh) + c.Eps)
				}
				if step == 0 && tc.cfg.WeightDecay == 0 {
					// First plain Adam step: m̂ = g, v̂ = g², so Δw = −lr·g/(|g|+ε) ≈ −lr·sign(g).
					for i, gi := range g {
						want := w0[i] - lr*gi/(math.Abs(gi)+c.Eps)
						if math.Abs(float64(Data(p.Value)[i])-want) > 1e-6 {
							t.Errorf("step 1 w[%d] = %v, want %v", i, Data(p.Value)[i], want)
						}
					}
				}
				for i := range w {
					if math.Abs(float64(Data(p.Value)[i])-w[i]) > 1e-6 {
						t.Errorf("step %d w[%d] = %v, want %v", step+1, i, Data(p.Value)[i], w[i])
					}
				}
			}
			if opt.Steps() != 2 {
				t.Errorf("steps = %d", opt.Steps())
			}
		})
	}
}

func TestAdamErrors(t *testing.T) {
	p := newParam("w", 3)
	if err := NewAdam([]*Param{p}, AdamConfig{Beta1: 1}).Step(0.1); err == nil {
		t.Error("beta1 = 1 accepted")
	}
	if err := NewAdam([]*Param{p}, AdamConfig{}).Step(math.NaN()); err == nil {
		t.Error("NaN learning rate accepted")
	}
	opt := NewAdam([]*Param{p}, AdamConfig{})
	p.Grad = NewDense(2)
	if err := opt.Step(0.1); err == nil {
		t.Error("gradient shape mismatch accepted")
	}
}

func TestZeroGrad(t *testing.T) {
	l := NewLinear(2, 2, testRNG(1))
	for _, p := range l.Params() {
		for i := range Data(p.Grad) {
			Data(p.Grad)[i] = 3
		}
	}
	ZeroGrad(l.Params())
	for _, p := range l.Params() {
		for _, v := range Data(p.Grad) {
			if v != 0 {
				t.Fatalf("%s grad not cleared: %v", p.Name, Data(p.Grad))
			}
		}
	}
}

func TestPolyDecay(t *testing.T) {
	tests := []struct {
		name        string
		base, end   float64
		step, total int
		power, want float64
	}{
		{"start", 1e-4, 1e-5, 0, 100, 0.9, 1e-4},
		{"end", 1e-4, 1e-5, 100, 100, 0.9, 1e-5},
		{"past end", 1e-4, 1e-5, 150, 100, 0.9, 1e-5},
		{"negative step", 1e-4, 1e-5, -3, 100, 0.9, 1e-4},
		{"midpoint p0.9", 1e-4, 1e-5, 50, 100, 0.9, 9e-5*math.Pow(0.5, 0.9) + 1e-5},
		{"midpoint linear", 1, 0, 25, 100, 1, 0.75},
		{"quadratic", 2, 0, 50, 100, 2, 0.5},
		{"no total", 1, 0.1, 5, 0, 1, 0.1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := PolyDecay(tc.base, tc.end, tc.step, tc.total, tc.power)
			if math.Abs(got-tc.want) > 1e-15 {
				t.Errorf("PolyDecay = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestKaimingInit(t *testing.T) {
	a, b := NewLinear(256, 300, testRNG(5)), NewLinear(256, 300, testRNG(5))
	c := NewLinear(256, 300, testRNG(6))
	wa, wb, wc := Data(a.Weight.Value), Data(b.Weight.Value), Data(c.Weight.Value)
	same := true
	for i := range wa {
		if wa[i] != wb[i] {
			t.Fatalf("same seed gives different weights at %d", i)
		}
		same = same && wa[i] == wc[i]
	}
	if same {
		t.Error("different seeds give identical weights")
	}
	bound := KaimingBound(256)
	var s2 float64
	for _, v := range wa {
		if math.Abs(float64(v)) > bound {
			t.Fatalf("|w| = %v exceeds the bound %v", v, bound)
		}
		s2 += float64(v) * float64(v)
	}
	// U(−b, b) has variance b²/3 = 2/fanIn. With 76800 samples the relative
	// standard error of the sample second moment is sqrt(0.8/76800) ≈ 0.3%.
	variance := s2 / float64(len(wa))
	if want := 2.0 / 256; math.Abs(variance-want) > 0.02*want {
		t.Errorf("weight variance %v, want %v ± 2%%", variance, want)
	}
	for _, v := range Data(a.Bias.Value) {
		if v != 0 {
			t.Fatal("bias not zero")
		}
	}
	conv, err := NewConv2d(Conv2dConfig{In: 16, Out: 8, Kernel: 3}, testRNG(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range Data(conv.Weight.Value) {
		if math.Abs(float64(v)) > KaimingBound(16*9) {
			t.Fatalf("conv weight %v exceeds the fan-in bound", v)
		}
	}
}
