package infer

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/internal/testmodels"
)

// TestConfidenceReadoutClosedForms: each meaning's read-out equals its
// closed form in float64 over raw values spanning the convention's range.
func TestConfidenceReadoutClosedForms(t *testing.T) {
	tests := []struct {
		name string
		c    ConfidenceSpec
		raw  []float64
		want func(v float64) float64
	}{
		// UniDepthV2 exports exp(e), clipped to e in [-8, 8]: u = exp(ln v) - 1.
		{"log_error exp", ConfidenceSpec{Meaning: ConfidenceLogError, Activation: ActivationExp}, []float64{math.Exp(-8), 1, 1.05, 2.5, math.Exp(8)},
			func(v float64) float64 { return math.Exp(math.Log(v)) - 1 }},
		{"log_error", ConfidenceSpec{Meaning: ConfidenceLogError}, []float64{-0.5, 1e-9, 0.01, 0.3, 2},
			func(v float64) float64 { return math.Exp(v) - 1 }},
		// Metric3D v2: c toward 1 - |d-y|/y, so u = 1 - c.
		{"relative_error_complement", ConfidenceSpec{Meaning: ConfidenceRelativeErrorComplement}, []float64{0, 0.25, 0.9, 1},
			func(v float64) float64 { return 1 - v }},
		// Depth Anything 3: conf = exp(x) + 1 >= 1, u = 1/conf.
		{"ranking", ConfidenceSpec{Meaning: ConfidenceRanking}, []float64{1 + math.Exp(-6), 1.05, 2, 1 + math.Exp(6)},
			func(v float64) float64 { return 1 / v }},
		{"spread", ConfidenceSpec{Meaning: ConfidenceSpread}, []float64{0, 0.003, 0.2, 4},
			func(v float64) float64 { return v }},
		// MoGe: a sigmoid mask, valid above 0.5.
		{"validity", ConfidenceSpec{Meaning: ConfidenceValidity}, []float64{0, 0.02, 0.5, 0.97, 1},
			func(v float64) float64 { return 1 - v }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := make([]float32, len(tc.raw))
			for i, v := range tc.raw {
				src[i] = float32(v)
			}
			dst := make([]float32, len(src))
			if bad := tc.c.Readout().Apply(dst, src); bad != 0 {
				t.Fatalf("%d values marked invalid: %v -> %v", bad, src, dst)
			}
			for i, v := range src {
				want := tc.want(float64(v))
				// float32 rounding of one operation on values near 1
				// (1 - v, v - 1): 2^-24 absolute.
				if math.Abs(float64(dst[i])-want) > 2e-7*math.Abs(want)+6e-8 {
					t.Errorf("raw %v: read %v, want %v", v, dst[i], want)
				}
			}
		})
	}
}

// TestConfidenceReadoutInvalid: values outside a meaning's domain become
// NaN and are counted; the others are read.
func TestConfidenceReadoutInvalid(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	src := []float32{nan, inf, -1, 0, 0.5, 2}
	for _, tc := range []struct {
		c       ConfidenceSpec
		invalid []bool // per src value
	}{
		{ConfidenceSpec{Meaning: ConfidenceLogError, Activation: ActivationExp}, []bool{true, true, true, true, false, false}},
		{ConfidenceSpec{Meaning: ConfidenceLogError}, []bool{true, true, false, false, false, false}},
		{ConfidenceSpec{Meaning: ConfidenceRelativeErrorComplement}, []bool{true, true, false, false, false, false}},
		{ConfidenceSpec{Meaning: ConfidenceRanking}, []bool{true, true, true, true, false, false}},
		{ConfidenceSpec{Meaning: ConfidenceSpread}, []bool{true, true, true, false, false, false}},
		{ConfidenceSpec{Meaning: ConfidenceValidity}, []bool{true, true, true, false, false, true}},
	} {
		dst := make([]float32, len(src))
		bad := tc.c.Readout().Apply(dst, src)
		want := 0
		for i, inv := range tc.invalid {
			if inv {
				want++
			}
			if got := dst[i] != dst[i]; got != inv {
				t.Errorf("%s %s: raw %v read %v, invalid %v, want %v", tc.c.Meaning, tc.c.Activation, src[i], dst[i], got, inv)
			}
		}
		if bad != want {
			t.Errorf("%s %s: %d counted invalid, want %d", tc.c.Meaning, tc.c.Activation, bad, want)
		}
	}
}

// TestConfidenceSpecErrors: unknown meanings and misplaced keys fail with
// the key named.
func TestConfidenceSpecErrors(t *testing.T) {
	const in = "input: {name: image, height: 8, width: 8}\ndepth: {name: depth, meaning: metric_depth}\n"
	for _, tc := range []struct{ text, want string }{
		{in + "confidence: {name: conf, meaning: sigma}\n", `confidence.meaning: "sigma" is not one of log_error, relative_error_complement, ranking, spread, validity`},
		{in + "confidence: {name: conf}\n", "confidence.meaning: empty"},
		{in + "confidence: {meaning: ranking}\n", "confidence.name: empty"},
		{in + "confidence: {name: depth, meaning: ranking}\n", `confidence.name: "depth" is also depth`},
		{in + "confidence: {name: conf, meaning: ranking, activation: exp}\n", "confidence.activation: exp applies to meaning log_error only, not ranking"},
		{in + "confidence: {name: conf, meaning: log_error, activation: expp1}\n", `confidence.activation: "expp1" is not exp`},
		{in + "confidence: {name: conf, meaning: ranking, scale: 2}\n", "field scale not found"},
		{"kind: auxue\ninput: {name: f, channels: 4, height: 8, width: 8}\nscale: {name: s}\nepistemic: {name: e}\nconfidence: {name: c, meaning: ranking}\n",
			"confidence: only a depth model has it"},
	} {
		_, err := ParseIOSpec([]byte(tc.text), "c.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got %v\nwant %q", tc.text, err, tc.want)
		}
	}
	// A valid line round-trips through Marshal.
	s, err := ParseIOSpec([]byte(in+testmodels.ConfidenceSpecs["unidepth"]), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Marshal("test")
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseIOSpec(b, "back.yaml")
	if err != nil || back.Confidence == nil || *back.Confidence != *s.Confidence {
		t.Fatalf("round trip: %v, %+v\n%s", err, back.Confidence, b)
	}
}

// TestConfidenceModels: each convention, built by python3-onnx and run by
// ONNX Runtime, reads back as the closed form of its definition
// (testmodels.ConfidenceWant, float64) on the input grid and, resampled
// with the depth, at twice the input's size; a confidence at another
// resolution than the depth fails naming the key.
func TestConfidenceModels(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for _, kind := range testmodels.ConfidenceKinds {
		t.Run(kind, func(t *testing.T) {
			model, _ := testmodels.ConfidenceModel(t, kind, dir)
			m := openConvention(t, model, testmodels.ConfidenceSpecText(kind))
			iw, ih := testmodels.Width, testmodels.Height
			for _, b := range []int{1, 2} {
				fw, fh := b*iw, b*ih
				rgb := conventionImage(fw, fh, b)
				dp, err := m.RunDepth(ctx, rgb, fw, fh)
				if err != nil {
					t.Fatal(err)
				}
				if len(dp.Confidence) != iw*ih || len(dp.FrameConfidence) != fw*fh {
					t.Fatalf("confidence maps of %d and %d values, want %d and %d", len(dp.Confidence), len(dp.FrameConfidence), iw*ih, fw*fh)
				}
				worst := 0.0
				for y := range ih {
					for x := range iw {
						o := 3 * (b*y*fw + b*x)
						want := testmodels.ConfidenceWant(kind, rgb[o], rgb[o+1], rgb[o+2])
						got := float64(dp.Confidence[y*iw+x])
						worst = math.Max(worst, math.Abs(got-want)/(math.Abs(want)+1e-3))
					}
				}
				// float32 through the graph's Exp/Log/Sigmoid and the
				// read-out: a few ulps of values up to 20 (marigold).
				if worst > 2e-5 {
					t.Fatalf("frame %dx%d: read-out differs from the closed form by %.3g (relative)", fw, fh, worst)
				}
				// At the frame's size the confidence is resampled exactly
				// as the depth is (the depth grid's remap).
				want := make([]float32, fw*fh)
				if err := NewRemap(dp.Geometry, iw, ih).Apply(dp.Confidence, want); err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if dp.FrameConfidence[i] != want[i] {
						t.Fatalf("frame %dx%d: frame confidence[%d] = %v, the remapped map has %v", fw, fh, i, dp.FrameConfidence[i], want[i])
					}
				}
			}
		})
	}
	t.Run("coarse", func(t *testing.T) {
		model, _ := testmodels.ConfidenceModel(t, "coarse", dir)
		s, err := ParseIOSpec([]byte(testmodels.ConfidenceSpecText("coarse")), "coarse.yaml")
		if err != nil {
			t.Fatal(err)
		}
		_, err = OpenModels(ctx, ModelsConfig{Depth: model, DepthSpec: s}, nil)
		if err == nil || !strings.Contains(err.Error(), `confidence: output "conf" is 32x16 (W x H), the depth output is 64x32`) {
			t.Fatalf("confidence at half resolution: %v", err)
		}
	})
}

// TestConfidenceNoAllocs: reading a confidence output costs no allocation
// per frame once the frame size is known.
func TestConfidenceNoAllocs(t *testing.T) {
	model, _ := testmodels.ConfidenceModel(t, "da3", t.TempDir())
	m := openConvention(t, model, testmodels.ConfidenceSpecText("da3"))
	fw, fh := 2*testmodels.Width, 2*testmodels.Height
	rgb := conventionImage(fw, fh, 2)
	ctx := context.Background()
	if _, err := m.RunDepth(ctx, rgb, fw, fh); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(10, func() {
		if _, err := m.RunDepth(ctx, rgb, fw, fh); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("%v allocations per frame", allocs)
	}
}

// BenchmarkConfidenceReadout: the read-out of a 640x192 map per meaning.
func BenchmarkConfidenceReadout(b *testing.B) {
	src := make([]float32, 640*192)
	for i := range src {
		src[i] = 1 + float32(i%97)/97
	}
	dst := make([]float32, len(src))
	for _, meaning := range []string{ConfidenceLogError, ConfidenceRelativeErrorComplement, ConfidenceRanking, ConfidenceSpread} {
		b.Run(meaning, func(b *testing.B) {
			r := ConfidenceSpec{Meaning: meaning}.Readout()
			b.ReportAllocs()
			b.SetBytes(int64(4 * len(src)))
			for b.Loop() {
				r.Apply(dst, src)
			}
		})
	}
}

// TestConfidenceHead: confidence_head.py's outputs on a real depth graph
// (the seeded test network) read back as their closed forms of the
// model's own depth d: with g = |ln d(x+1) - ln d(x)| + |ln d(y+1) - ln d(y)|
// (0 past the last column and row), da3 u = 1/(exp(3 - 30 g) + 1),
// metric3d u = min(5 g, 1), unidepth u = exp(min(2 g, 8)) - 1.
func TestConfidenceHead(t *testing.T) {
	dir := t.TempDir()
	f := testmodels.Write(t, dir)
	const in = "input: {name: image, height: 32, width: 64, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}\ndepth: {name: depth, meaning: metric_depth}\n"
	rgb := conventionImage(64, 32, 1)
	for _, kind := range []string{"da3", "metric3d", "unidepth"} {
		t.Run(kind, func(t *testing.T) {
			out := filepath.Join(dir, kind+".onnx")
			line := testmodels.AddConfidenceHead(t, f.Depth, out, kind)
			m := openConvention(t, out, in+"confidence: "+line+"\n")
			dp, err := m.RunDepth(context.Background(), rgb, 64, 32)
			if err != nil {
				t.Fatal(err)
			}
			ln := func(x, y int) float64 { return math.Log(math.Max(float64(dp.Depth[y*64+x]), 1e-3)) }
			worst := 0.0
			for y := range 32 {
				for x := range 64 {
					g := 0.0
					if x < 63 {
						g += math.Abs(ln(x+1, y) - ln(x, y))
					}
					if y < 31 {
						g += math.Abs(ln(x, y+1) - ln(x, y))
					}
					var want float64
					switch kind {
					case "da3":
						want = 1 / (math.Exp(3-30*g) + 1)
					case "metric3d":
						want = math.Min(5*g, 1)
					case "unidepth":
						want = math.Exp(math.Min(2*g, 8)) - 1
					}
					worst = math.Max(worst, math.Abs(float64(dp.Confidence[y*64+x])-want)/(1+math.Abs(want)))
				}
			}
			// float32 logs of depths near 1-80 m and the differences of
			// neighbours (g to ~1e-6 absolute), times up to 30, relative to
			// 1 + |u| (unidepth's exp reaches hundreds).
			if worst > 1e-4 {
				t.Fatalf("read-out differs from the closed form by %.3g (relative to 1 + |u|)", worst)
			}
		})
	}
}
