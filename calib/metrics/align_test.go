package metrics

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAlignInverseDepthClosedForm: a prediction that is an exact affine map
// of the true inverse depth, r = (1/y - t0)/s0, is aligned back with s = s0
// and t = t0 whatever the pixels without ground truth hold; with noise the
// fit solves the 2x2 normal equations [sum r^2, sum r; sum r, n] [s; t] =
// [sum r z; sum z], solved here by Cramer's rule.
func TestAlignInverseDepthClosedForm(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	for _, tc := range []struct{ s0, t0, noise float64 }{{2.5, 0.01, 0}, {-0.3, 0.4, 0}, {40, -0.02, 0}, {1.7, 0.05, 0.01}} {
		n := 500
		r, gt := make([]float32, n), make([]float32, n)
		for i := range r {
			if i%4 == 0 { // no ground truth: anything, even NaN
				r[i] = float32(math.NaN())
				if i%8 == 0 {
					r[i] = 1e6
				}
				continue
			}
			y := 2 + 68*rng.Float64()
			gt[i] = float32(y)
			r[i] = float32((1/float64(gt[i])-tc.t0)/tc.s0 + tc.noise*rng.NormFloat64())
		}
		a, err := AlignInverseDepth(r, gt)
		if err != nil {
			t.Fatal(err)
		}
		var srr, sr, srz, sz, m float64
		for i, y := range gt {
			if y > 0 {
				v, z := float64(r[i]), 1/float64(y)
				srr, sr, srz, sz, m = srr+v*v, sr+v, srz+v*z, sz+z, m+1
			}
		}
		det := srr*m - sr*sr
		wantS, wantT := (srz*m-sr*sz)/det, (srr*sz-sr*srz)/det
		if tc.noise == 0 {
			wantS, wantT = tc.s0, tc.t0
		}
		if a.N != 375 || math.Abs(a.S-wantS) > 1e-6*math.Abs(wantS) || math.Abs(a.T-wantT) > 1e-6*(1+math.Abs(wantT)) {
			t.Errorf("s0 %v t0 %v noise %v: fit %+v, want s %v t %v over 375 pixels", tc.s0, tc.t0, tc.noise, a, wantS, wantT)
		}
		if tc.noise == 0 {
			d := make([]float32, n)
			a.Apply(r, d, 80)
			for i, y := range gt {
				if y > 0 && math.Abs(float64(d[i]-y)) > 1e-3*float64(y) {
					t.Fatalf("aligned depth %v, want %v", d[i], y)
				}
			}
		}
	}
}

func TestAlignApplyClampsAndRejects(t *testing.T) {
	a := Alignment{S: 1, T: 0}
	d := make([]float32, 4)
	a.Apply([]float32{0.5, 0.001, -2, float32(math.Inf(1))}, d, 80)
	if d[0] != 2 || d[1] != 80 || d[2] != 80 || d[3] != 0 {
		t.Fatalf("aligned %v, want [2 80 80 0]", d)
	}
	if _, err := AlignInverseDepth([]float32{1, 1, 1}, []float32{2, 3, 4}); err == nil {
		t.Fatal("constant prediction aligned")
	}
	if _, err := AlignInverseDepth([]float32{1, 2}, []float32{0, 3}); err == nil {
		t.Fatal("one ground-truth pixel aligned")
	}
}
