package auxue

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mathext"
)

const eulerGamma = 0.57721566490153286060651209008240243

func TestDigammaClosedForms(t *testing.T) {
	tests := []struct {
		name string
		x    float64
		want float64
	}{
		{"psi(1)=-gamma", 1, -eulerGamma},
		{"psi(1/2)=-gamma-2ln2", 0.5, -eulerGamma - 2*math.Ln2},
		{"psi(2)=1-gamma", 2, 1 - eulerGamma},
		{"psi(1/4)=-gamma-pi/2-3ln2", 0.25, -eulerGamma - math.Pi/2 - 3*math.Ln2},
		{"psi(10)=H9-gamma", 10, 1 + 1.0/2 + 1.0/3 + 1.0/4 + 1.0/5 + 1.0/6 + 1.0/7 + 1.0/8 + 1.0/9 - eulerGamma},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Digamma(tt.x); math.Abs(got-tt.want) > 1e-13 {
				t.Errorf("Digamma(%g) = %.16g, want %.16g", tt.x, got, tt.want)
			}
		})
	}
}

func TestDigammaRecurrenceAndAsymptotics(t *testing.T) {
	for _, x := range []float64{1e-3, 0.1, 0.7, 1.3, 4.9, 5.9, 6.1, 17, 250, 1e5} {
		lhs := Digamma(x + 1)
		rhs := Digamma(x) + 1/x
		if math.Abs(lhs-rhs) > 1e-12*math.Max(1, math.Abs(rhs)) {
			t.Errorf("psi(%g+1) = %.16g, psi(x)+1/x = %.16g", x, lhs, rhs)
		}
		// gonum's independent implementation as a peer; it is itself accurate
		// to about 1e-11 (the closed forms above pin ours to 1e-13).
		if peer := mathext.Digamma(x); math.Abs(Digamma(x)-peer) > 1e-10*math.Max(1, math.Abs(peer)) {
			t.Errorf("Digamma(%g) = %.16g, gonum says %.16g", x, Digamma(x), peer)
		}
	}
	// psi(x) - ln x -> -1/(2x) for large x.
	for _, x := range []float64{1e6, 1e9, 1e12} {
		got := Digamma(x) - math.Log(x)
		want := -0.5/x - 1/(12*x*x)
		if math.Abs(got-want) > 1e-15*math.Log(x) {
			t.Errorf("psi(%g) - ln x = %.6g, want %.6g", x, got, want)
		}
	}
}

func TestTrigamma(t *testing.T) {
	if got, want := Trigamma(1), math.Pi*math.Pi/6; math.Abs(got-want) > 1e-13 {
		t.Errorf("Trigamma(1) = %.16g, want pi^2/6 = %.16g", got, want)
	}
	if got, want := Trigamma(0.5), math.Pi*math.Pi/2; math.Abs(got-want) > 1e-12 {
		t.Errorf("Trigamma(1/2) = %.16g, want pi^2/2 = %.16g", got, want)
	}
	for _, x := range []float64{0.05, 0.5, 1.5, 5.99, 6, 30, 1e4} {
		// Central difference of Digamma.
		h := 1e-5 * math.Max(x, 1e-2)
		fd := (Digamma(x+h) - Digamma(x-h)) / (2 * h)
		if got := Trigamma(x); math.Abs(got-fd) > 1e-6*math.Abs(fd) {
			t.Errorf("Trigamma(%g) = %.12g, finite difference of Digamma = %.12g", x, got, fd)
		}
		// psi'(x) = zeta(2, x) (Hurwitz zeta) as an independent peer.
		if z := mathext.Zeta(2, x); math.Abs(Trigamma(x)-z) > 1e-10*z {
			t.Errorf("Trigamma(%g) = %.16g, zeta(2,x) = %.16g", x, Trigamma(x), z)
		}
		if lhs, rhs := Trigamma(x+1), Trigamma(x)-1/(x*x); math.Abs(lhs-rhs) > 1e-12*math.Max(1, math.Abs(rhs)) {
			t.Errorf("recurrence at %g: %.16g vs %.16g", x, lhs, rhs)
		}
	}
	// psi'(x) ~ 1/x + 1/(2x^2) for large x.
	for _, x := range []float64{1e6, 1e10} {
		if got, want := Trigamma(x), 1/x+0.5/(x*x); math.Abs(got-want) > 1e-6/(x*x) {
			t.Errorf("Trigamma(%g) = %.16g, want %.16g", x, got, want)
		}
	}
}

func TestSpecialBadArguments(t *testing.T) {
	for _, x := range []float64{0, -1, -0.5, math.NaN(), math.Inf(-1)} {
		if v := Digamma(x); !math.IsNaN(v) {
			t.Errorf("Digamma(%g) = %g, want NaN", x, v)
		}
		if v := Trigamma(x); !math.IsNaN(v) {
			t.Errorf("Trigamma(%g) = %g, want NaN", x, v)
		}
	}
	if v := Digamma(math.Inf(1)); !math.IsInf(v, 1) {
		t.Errorf("Digamma(+Inf) = %g", v)
	}
	if v := LogGamma(5); math.Abs(v-math.Log(24)) > 1e-14 {
		t.Errorf("LogGamma(5) = %g, want ln 24", v)
	}
}
