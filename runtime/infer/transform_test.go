package infer

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// TestReadoutClosedForms: each meaning's folded read-out equals its closed
// form in float64, over raw values spanning the convention's range.
func TestReadoutClosedForms(t *testing.T) {
	tests := []struct {
		name  string
		o     OutputSpec
		focal float64
		raw   []float64
		want  func(v float64) float64
	}{
		{"metric", OutputSpec{Meaning: MeaningMetricDepth}, 1, []float64{0.5, 3, 79}, func(v float64) float64 { return v }},
		{"metric scale shift", OutputSpec{Meaning: MeaningMetricDepth, Scale: 0.001, Shift: 0.5}, 1, []float64{100, 5000, 65535},
			func(v float64) float64 { return 0.001*v + 0.5 }},
		{"metric negative", OutputSpec{Meaning: MeaningMetricDepth, Scale: -2}, 1, []float64{-0.5, -10}, func(v float64) float64 { return -2 * v }},
		{"canonical focal", OutputSpec{Meaning: MeaningMetricDepth, CanonicalFocal: 1000}, 0.7215, []float64{1, 10, 80},
			func(v float64) float64 { return v * 0.7215 }},
		{"disparity fB", OutputSpec{Meaning: MeaningDisparity, Scale: 0.54 * 721}, 1, []float64{1, 20, 200}, func(v float64) float64 { return 0.54 * 721 / v }},
		{"negative disparity", OutputSpec{Meaning: MeaningDisparity, Scale: -0.3}, 1, []float64{-0.15, -0.03, -0.01}, func(v float64) float64 { return -0.3 / v }},
		{"disparity offset", OutputSpec{Meaning: MeaningDisparity, Scale: 3997.684 * 0.193, Shift: 131.111}, 1, []float64{10, 100, 250},
			func(v float64) float64 { return 3997.684 * 0.193 / (v + 131.111) }},
		{"inverse depth", OutputSpec{Meaning: MeaningInverseDepth}, 1, []float64{0.0125, 0.5, 10}, func(v float64) float64 { return 1 / v }},
		// Depth Pro: d = f_px / (W c), f_px / W the focal factor with canonical_focal = W.
		{"canonical inverse depth", OutputSpec{Meaning: MeaningInverseDepth, CanonicalFocal: 1536}, 1000.0 / 1536, []float64{0.01, 0.5, 3},
			func(v float64) float64 { return 1000 / (1536 * v) }},
		// DPT-Hybrid KITTI: d = 1/(0.00006016 v + 0.00579).
		{"dpt kitti", OutputSpec{Meaning: MeaningInverseDepth, Scale: 1 / 0.00006016, Shift: 0.00579 / 0.00006016}, 1, []float64{100, 1000, 3000},
			func(v float64) float64 { return 1 / (0.00006016*v + 0.00579) }},
		{"sigmoid", OutputSpec{Meaning: MeaningSigmoidDisparity, MinDepth: 0.1, MaxDepth: 100}, 1, []float64{0.001, 0.05, 0.5, 1},
			func(v float64) float64 { return 1 / (1/100. + (1/0.1-1/100.)*v) }},
		{"sigmoid stereo", OutputSpec{Meaning: MeaningSigmoidDisparity, MinDepth: 0.1, MaxDepth: 100, Scale: 5.4}, 1, []float64{0.001, 0.05, 0.5, 1},
			func(v float64) float64 { return 5.4 / (1/100. + (1/0.1-1/100.)*v) }},
		{"relative", OutputSpec{Meaning: MeaningRelative}, 1, []float64{-3, 0, 2.5}, func(v float64) float64 { return v }},
		{"relative flipped", OutputSpec{Meaning: MeaningRelative, Scale: -1}, 1, []float64{-0.245, -0.026}, func(v float64) float64 { return -v }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.o.Readout(tc.focal)
			src := make([]float32, len(tc.raw))
			for i, v := range tc.raw {
				src[i] = float32(v)
			}
			dst := make([]float32, len(src))
			if bad := r.Apply(dst, src); bad != 0 {
				t.Fatalf("%d values marked invalid: %v -> %v", bad, src, dst)
			}
			for i, v := range src {
				want := tc.want(float64(v))
				if math.Abs(float64(dst[i])-want) > 2e-6*math.Abs(want)+1e-7 {
					t.Errorf("raw %v: read %v, want %v (readout %+v)", v, dst[i], want, r)
				}
			}
		})
	}
}

// TestReadoutInvalid: metric read-outs mark non-finite and non-positive
// depths as 0 and count them; relative ones only non-finite values.
func TestReadoutInvalid(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	src := []float32{nan, inf, 0, -1, 2}
	for _, tc := range []struct {
		o    OutputSpec
		want []float32
		bad  int
	}{
		{OutputSpec{Meaning: MeaningMetricDepth}, []float32{0, 0, 0, 0, 2}, 4},
		{OutputSpec{Meaning: MeaningDisparity, Scale: -1}, []float32{0, 0, 0, 1, 0}, 4},
		{OutputSpec{Meaning: MeaningRelative, Scale: -1}, []float32{0, 0, 0, 1, -2}, 2},
	} {
		dst := make([]float32, len(src))
		bad := tc.o.Readout(1).Apply(dst, src)
		for i := range dst {
			if dst[i] != tc.want[i] && !(dst[i] == 0 && tc.want[i] == 0) {
				t.Fatalf("%+v: %v -> %v, want %v", tc.o, src, dst, tc.want)
			}
		}
		if bad != tc.bad {
			t.Errorf("%+v: %d invalid, want %d", tc.o, bad, tc.bad)
		}
	}
}

// TestFocalFactor: f_input / canonical_focal with f_input the frame's fx
// scaled by the part of the input the frame takes (CW / FrameW):
// stretched 1280 -> 640 halves fx; letterboxed 1280x720 into 640x640,
// too.
func TestFocalFactor(t *testing.T) {
	o := OutputSpec{Meaning: MeaningMetricDepth, CanonicalFocal: 1000}
	for _, tc := range []struct {
		g    Geometry
		fx   float64
		want float64
	}{
		{Fit(640, 192, 640, 192, ResizeStretch), 721.5, 0.7215},
		{Fit(1280, 384, 640, 192, ResizeStretch), 1443, 0.7215},
		{Fit(1280, 720, 640, 640, ResizeLetterbox), 1000, 0.5},
	} {
		if got := o.FocalFactor(tc.fx, tc.g); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%+v fx %v: factor %v, want %v", tc.g, tc.fx, got, tc.want)
		}
	}
	if got := (OutputSpec{Meaning: MeaningMetricDepth}).FocalFactor(500, Fit(64, 32, 64, 32, ResizeStretch)); got != 1 {
		t.Errorf("an output without canonical_focal: factor %v, want 1", got)
	}
}

// TestFloat16Exhaustive: every finite half converts to float32 and back
// unchanged, and Float32FromHalf agrees with the definition
// (-1)^s 2^(e-15) (1 + m/1024), subnormals 2^-14 m/1024.
func TestFloat16Exhaustive(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		u := uint16(h)
		e, m := int(u>>10)&0x1f, float64(u&0x3ff)
		f := onnxrt.Float32FromHalf(u)
		if e == 0x1f {
			if m == 0 && !math.IsInf(float64(f), 0) || m != 0 && !math.IsNaN(float64(f)) {
				t.Fatalf("%#04x: %v", u, f)
			}
			if m != 0 && onnxrt.Float16(f)&0x7c00 != 0x7c00 {
				t.Fatalf("NaN %#04x came back as %#04x", u, onnxrt.Float16(f))
			}
			continue
		}
		want := math.Ldexp(1+m/1024, e-15)
		if e == 0 {
			want = math.Ldexp(m/1024, -14)
		}
		if u&0x8000 != 0 {
			want = -want
		}
		if float64(f) != want {
			t.Fatalf("%#04x: %v, want %v", u, f, want)
		}
		if back := onnxrt.Float16(f); back != u {
			t.Fatalf("%#04x -> %v -> %#04x", u, f, back)
		}
	}
}

// TestFloat16Rounding: Float16 of a float32 is the nearest half (ties to
// the even mantissa), found by comparing with the neighbours.
func TestFloat16Rounding(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 200000; i++ {
		// Magnitudes from 2^-26 to 2^17: subnormals, normals, overflow.
		f := float32(math.Ldexp(rng.Float64()+0.5, rng.IntN(44)-26))
		if rng.IntN(2) == 0 {
			f = -f
		}
		h := onnxrt.Float16(f)
		got := float64(onnxrt.Float32FromHalf(h))
		if math.Abs(float64(f)) >= 65520 {
			if !math.IsInf(got, 0) {
				t.Fatalf("%v -> %v, want Inf", f, got)
			}
			continue
		}
		err := math.Abs(got - float64(f))
		mag := h & 0x7fff
		for _, nb := range []uint16{mag - 1, mag + 1} {
			if nb >= 0x7c00 || nb > 0x7fff {
				continue
			}
			other := math.Abs(float64(onnxrt.Float32FromHalf(nb|h&0x8000)) - float64(f))
			if other < err || (other == err && h&1 == 1) {
				t.Fatalf("%v -> %#04x (%v, error %v), but %#04x is nearer or even (error %v)", f, h, got, err, nb|h&0x8000, other)
			}
		}
	}
}
