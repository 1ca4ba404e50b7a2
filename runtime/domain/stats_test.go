package domain

import (
	"math"
	"testing"
)

// testFrame: a w x h picture whose top half is (r0,g0,b0) and bottom half
// alternates columns between two colours, depth d0 above and d1 below,
// K/S k0 / k1 and scale s0 / s1 likewise.
func testFrame(w, h int) *Frame {
	f := &Frame{RGB: make([]uint8, 3*w*h), Width: w, Height: h,
		Depth: make([]float32, w*h), DepthW: w, DepthH: h,
		Epistemic: make([]float32, w*h/16), Scale: make([]float32, w*h/16), AuxW: w / 4, AuxH: h / 4}
	for y := range h {
		for x := range w {
			p := f.RGB[3*(y*w+x):]
			if y < h/2 {
				p[0], p[1], p[2] = 51, 102, 153
				f.Depth[y*w+x] = math.E
			} else {
				if x%2 == 0 {
					p[0], p[1], p[2] = 0, 0, 0
				} else {
					p[0], p[1], p[2] = 255, 255, 255
				}
				f.Depth[y*w+x] = float32(math.Exp(3))
			}
		}
	}
	for y := range f.AuxH {
		for x := range f.AuxW {
			i := y*f.AuxW + x
			if y < f.AuxH/2 {
				f.Epistemic[i], f.Scale[i] = 0.25, 1
			} else {
				f.Epistemic[i], f.Scale[i] = 0.75, float32(math.Exp(-2))
			}
		}
	}
	return f
}

// TestExtractClosedForm checks each statistic against its value on a
// frame built to give round numbers.
func TestExtractClosedForm(t *testing.T) {
	l := Layout{ImageBands: 2, MapBands: 2}
	e, err := NewExtractor(l)
	if err != nil {
		t.Fatal(err)
	}
	f := testFrame(64, 32)
	x := make([]float64, l.Dim())
	if err := e.Extract(f, x); err != nil {
		t.Fatal(err)
	}
	// Sampled columns are even: the bottom band's sampled pixels are all
	// black, their right neighbours white.
	top := []float64{0.2, 0.4, 0.6}
	// Over both bands, sampled values are c (top) and 0 (bottom), half
	// each: mean c/2, std c/2. Gradient: 0 on top, 1 on the bottom.
	want := []float64{top[0], top[1], top[2], 0, 0, 0, 0.1, 0.2, 0.3,
		math.Log(0.5 + 1e-4), math.Log(0.5 + 1e-4), math.Log(0.5 + 1e-4),
		1, 3, 1, // depth log means per band, log std (two equal halves of 1 and 3)
		0.25, 0.75, // K/S
		0, -2} // log scale
	names := l.Names()
	if len(names) != len(want) || len(x) != len(want) {
		t.Fatalf("layout: %d names, %d values, want %d", len(names), len(x), len(want))
	}
	for i := range want {
		if math.Abs(x[i]-want[i]) > 1e-6 {
			t.Errorf("%s = %v, want %v", names[i], x[i], want[i])
		}
	}
}

func TestExtractFeatureGroups(t *testing.T) {
	l := Layout{ImageBands: 1, MapBands: 1, FeatureGroups: 2}
	e, _ := NewExtractor(l)
	f := testFrame(16, 8)
	f.FeatureC, f.FeatureH, f.FeatureW = 4, 2, 3
	f.Features = make([]float32, 4*6)
	for c := range 4 {
		for i := range 6 {
			f.Features[c*6+i] = float32(c*10 + i) // channel mean 10c + 2.5
		}
	}
	x := make([]float64, l.Dim())
	if err := e.Extract(f, x); err != nil {
		t.Fatal(err)
	}
	if g0, g1 := x[l.features()], x[l.features()+1]; g0 != 7.5 || g1 != 27.5 {
		t.Errorf("feature groups %v %v, want 7.5 27.5", g0, g1)
	}
}

func TestExtractErrors(t *testing.T) {
	l := DefaultLayout(true)
	e, _ := NewExtractor(l)
	x := make([]float64, l.Dim())
	for _, c := range []struct {
		name, want string
		edit       func(f *Frame)
	}{
		{"picture", "picture", func(f *Frame) { f.RGB = f.RGB[:10] }},
		{"depth", "depth", func(f *Frame) { f.DepthW++ }},
		{"aux", "AuxUE maps", func(f *Frame) { f.Scale = nil }},
		{"features", "feature tensor", func(f *Frame) {}},
	} {
		f := testFrame(32, 16)
		c.edit(f)
		if err := e.Extract(f, x); err == nil || !contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", c.name, err, c.want)
		}
	}
	if err := e.Extract(testFrame(32, 16), x[:3]); err == nil {
		t.Error("short destination accepted")
	}
	if _, err := NewExtractor(Layout{}); err == nil {
		t.Error("empty layout accepted")
	}
}

func TestExtractAllocatesNothing(t *testing.T) {
	l := DefaultLayout(false)
	e, _ := NewExtractor(l)
	f := testFrame(640, 192)
	x := make([]float64, l.Dim())
	if n := testing.AllocsPerRun(20, func() { _ = e.Extract(f, x) }); n != 0 {
		t.Errorf("Extract allocates %v times per frame", n)
	}
}

func BenchmarkExtract(b *testing.B) {
	l := DefaultLayout(false)
	e, _ := NewExtractor(l)
	f := testFrame(640, 192)
	f.Epistemic, f.Scale, f.AuxW, f.AuxH = make([]float32, 160*48), make([]float32, 160*48), 160, 48
	x := make([]float64, l.Dim())
	b.ReportAllocs()
	for b.Loop() {
		if err := e.Extract(f, x); err != nil {
			b.Fatal(err)
		}
	}
}
