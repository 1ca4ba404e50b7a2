package nnbench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunAgainstTorch runs the harness on small shapes of every op with the
// real PyTorch peer (scripts/deps.sh installs python3-torch): Go and PyTorch
// must agree on outputs and gradients (Run fails otherwise), and every figure
// of the table must be a positive, finite rate.
func TestRunAgainstTorch(t *testing.T) {
	cases := []Case{
		{Name: "conv s1 odd", Op: "conv", N: 2, In: 5, Out: 7, H: 9, W: 13, K: 3, Stride: 1, Pad: 1, Dil: 1},
		{Name: "conv s2 d2", Op: "conv", N: 1, In: 3, Out: 6, H: 17, W: 12, K: 3, Stride: 2, Pad: 2, Dil: 2},
		{Name: "conv 1x1", Op: "conv", N: 2, In: 9, Out: 4, H: 5, W: 6, K: 1, Stride: 1, Pad: 0, Dil: 1},
		{Name: "cosine", Op: "cosine", N: 2, In: 11, Out: 5, H: 4, W: 7},
		{Name: "linear", Op: "linear", N: 37, In: 13, Out: 29},
	}
	r, err := Run(context.Background(), Options{Cases: cases, Threads: []int{1, 2}, Rounds: 1, MinTime: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.Torch, "PyTorch ") {
		t.Errorf("torch version %q", r.Torch)
	}
	if len(r.Rows) != 2*len(cases) {
		t.Fatalf("%d rows, want %d", len(r.Rows), 2*len(cases))
	}
	for _, row := range r.Rows {
		if row.MaxRelErr > checkTol {
			t.Errorf("%s: Go and torch differ by %g", row.Case.Name, row.MaxRelErr)
		}
		for _, v := range []float64{row.GoGFLOPS, row.TorchGFLOP, row.Ratio, row.GoPeak, row.TorchPeak} {
			if !(v > 0) || v > 1e6 {
				t.Errorf("%s, %d threads: figure %v", row.Case.Name, row.Threads, v)
			}
		}
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "conv s2 d2") || !strings.Contains(b.String(), "FMA peak") {
		t.Errorf("table:\n%s", b.String())
	}
}

// TestPeakIsAFMARate checks the peak loop against the flop count of a known
// number of iterations: positive and below a generous bound for one core
// (64 single-precision flops per cycle at 6 GHz).
func TestPeakIsAFMARate(t *testing.T) {
	p := Peak(1, 30*time.Millisecond)
	if !(p > 0) || p > 64*6 {
		t.Fatalf("peak %v GFLOP/s", p)
	}
}

func TestCaseErrors(t *testing.T) {
	for _, c := range []Case{
		{Name: "op", Op: "pool", N: 1, In: 1, Out: 1},
		{Name: "zero", Op: "conv", N: 1, In: 0, Out: 1, H: 3, W: 3, K: 3, Stride: 1, Dil: 1},
		{Name: "stride", Op: "conv", N: 1, In: 1, Out: 1, H: 3, W: 3, K: 3, Stride: 0, Dil: 1},
	} {
		if _, err := Run(context.Background(), Options{Cases: []Case{c}}); err == nil || !strings.Contains(err.Error(), c.Name) {
			t.Errorf("case %+v: error %v", c, err)
		}
	}
	_, err := Run(context.Background(), Options{Cases: DefaultCases()[:1], Python: "/nonexistent/python3"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/python3") {
		t.Errorf("missing interpreter: %v", err)
	}
}
