package domain

import (
	"math"
	"testing"
)

// TestFrameBandsMatchTheRecord: the per-frame band values are the values
// the record's quantiles are over: for frames whose K/S and log b, log
// depth entries are set by hand, FrameBands gives them back
// (exp(log b - log depth) = b/depth), and the record's P50 of a band is
// the middle frame's value.
func TestFrameBandsMatchTheRecord(t *testing.T) {
	l := DefaultLayout(false)
	frames := make([][]float64, 11)
	for i := range frames {
		x := make([]float64, l.Dim())
		for j := range x {
			x[j] = 0.01 * float64((i*7+j*3)%13) // varied, so that Fit's spreads are positive
		}
		for b := range l.MapBands {
			x[l.ksBands()+b] = 0.1*float64(b) + 0.01*float64(i)
			x[l.scaleBands()+b] = math.Log(0.5 * float64(i+1))
			x[l.depthBands()+b] = math.Log(10 * float64(b+1))
		}
		frames[i] = x
	}
	ks, bd := make([]float64, l.MapBands), make([]float64, l.MapBands)
	if err := l.FrameBands(frames[3], ks, bd); err != nil {
		t.Fatal(err)
	}
	for b := range l.MapBands {
		if wantKS, wantBD := 0.1*float64(b)+0.03, 0.5*4/(10*float64(b+1)); math.Abs(ks[b]-wantKS) > 1e-12 || math.Abs(bd[b]-wantBD) > 1e-12 {
			t.Errorf("band %d: K/S %v b/depth %v, want %v and %v", b, ks[b], bd[b], wantKS, wantBD)
		}
	}
	rec, err := Fit(l, frames, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.FrameBands(frames[5], ks, bd); err != nil {
		t.Fatal(err)
	}
	for b := range l.MapBands {
		if rec.KS[b].P50 != ks[b] || math.Abs(rec.BOverDepth[b].P50-bd[b]) > 1e-12 {
			t.Errorf("band %d: record P50 K/S %v b/depth %v, middle frame %v %v", b, rec.KS[b].P50, rec.BOverDepth[b].P50, ks[b], bd[b])
		}
	}
	if err := l.FrameBands(frames[0][:3], ks, bd); err == nil {
		t.Error("short statistics vector accepted")
	}
}
