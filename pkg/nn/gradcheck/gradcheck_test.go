package gradcheck

import (
	"math"
	"strings"
	"testing"
)

func TestNumericGradClosedForm(t *testing.T) {
	// f(x) = Σ x_i³ + x_0 x_1 ; ∂f/∂x_i = 3x_i² (+ x_1 or x_0).
	x := []float32{0.5, -1.25, 2, 0}
	f := func() float64 {
		var s float64
		for _, v := range x {
			s += float64(v) * float64(v) * float64(v)
		}
		return s + float64(x[0])*float64(x[1])
	}
	g := NumericGrad(f, x, 1e-3)
	want := []float64{3*0.25 - 1.25, 3*1.5625 + 0.5, 12, 0}
	for i := range want {
		// Central differences err by h²·f'''/6 = 1e-6 for a cubic, plus float32 rounding of x.
		if math.Abs(g[i]-want[i]) > 1e-4 {
			t.Errorf("g[%d] = %v, want %v", i, g[i], want[i])
		}
	}
	if x[0] != 0.5 || x[1] != -1.25 || x[2] != 2 || x[3] != 0 {
		t.Errorf("x not restored: %v", x)
	}
}

func TestCompare(t *testing.T) {
	tol := Tolerance{Rel: 1e-2, Abs: 1e-6}
	tests := []struct {
		name      string
		analytic  []float32
		numeric   []float64
		wantWorst int
		wantPass  bool
	}{
		{"equal", []float32{1, 2, 3}, []float64{1, 2, 3}, 0, true},
		{"within rel", []float32{1, 100}, []float64{1.002, 100.5}, 1, true},
		{"one bad", []float32{1, 2, 3}, []float64{1, 2.5, 3}, 1, false},
		{"abs floor", []float32{0, 1e-7}, []float64{5e-7, 0}, 0, true},
		{"sign flip", []float32{0.3}, []float64{-0.3}, 0, false},
		{"nan", []float32{1, float32(math.NaN())}, []float64{1, 1}, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Compare(tc.analytic, tc.numeric, tol)
			if err != nil {
				t.Fatal(err)
			}
			if r.Worst != tc.wantWorst {
				t.Errorf("worst = %d, want %d (report %+v)", r.Worst, tc.wantWorst, r)
			}
			cerr := Check(tc.analytic, tc.numeric, tol)
			if (cerr == nil) != tc.wantPass {
				t.Errorf("Check error = %v, want pass %v", cerr, tc.wantPass)
			}
			if cerr != nil && !strings.Contains(cerr.Error(), "element") {
				t.Errorf("error does not name the element: %v", cerr)
			}
		})
	}
	if _, err := Compare([]float32{1}, []float64{1, 2}, tol); err == nil {
		t.Error("length mismatch accepted")
	}
}
