package infer

import (
	"context"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

const auxSpecYAML = `kind: auxue
input: {name: image, layout: NHWC, height: 256, width: 256, color: bgr, pixel_range: 255, mean: [1, 2, 3], std: [4, 5, 6], resize: letterbox}
depth_input: {name: depth, units: relative}
scale: {name: scale, units: relative}
epistemic: {name: epistemic}
alpha: {name: alpha}
auxue: {depth_model: midas.onnx, depth_model_sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef, factor: 4, k: 32, lambda: 0.01, global_context_bands: 4}
`

// TestSpecMarshalRoundTrip: what Marshal writes, ParseIOSpec reads back
// equal, for a depth model with every key and for an AuxUE.
func TestSpecMarshalRoundTrip(t *testing.T) {
	depth := IOSpec{Kind: KindDepth, Input: InputSpec{Name: "pixel_values", Layout: LayoutNHWC, Channels: 3, Height: 518, Width: 518,
		Color: ColorBGR, PixelRange: 255, Mean: []float32{123.7, 116.3, 103.5}, Std: []float32{58.4, 57.1, 57.4}, Resize: ResizeLetterbox},
		Depth: OutputSpec{Name: "predicted_depth", Meaning: MeaningRelative, Scale: 2}, Features: []FeatureSpec{{Name: "enc4"}}}
	aux, err := ParseIOSpec([]byte(auxSpecYAML), "auxue.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []IOSpec{depth, aux} {
		b, err := s.Marshal("a comment\nof two lines")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), "# a comment\n# of two lines\n") {
			t.Fatalf("comment missing:\n%s", b)
		}
		back, err := ParseIOSpec(b, "round-trip.yaml")
		if err != nil {
			t.Fatalf("%v\n%s", err, b)
		}
		if !reflect.DeepEqual(back, s) {
			t.Fatalf("round trip changed the spec:\n%+v\n%+v\n%s", back, s, b)
		}
	}
	if !aux.OwnsInputs() || !aux.Relative() || aux.AuxUE.Factor != 4 {
		t.Fatalf("auxue spec %+v", aux)
	}
}

// TestAuxUESpecErrors: every AuxUE key is checked, each error names it.
func TestAuxUESpecErrors(t *testing.T) {
	tests := []struct{ old, new, want string }{
		{"scale: {name: scale, units: relative}", "scale: {units: relative}", "scale.name: empty"},
		{"depth_input: {name: depth, units: relative}\nscale: {name: scale, units: relative}", "depth_input: {name: depth}\nscale: {name: scale}",
			`depth_input.units: "" is not one of metres, relative`},
		{"scale: {name: scale, units: relative}", "scale: {name: scale, units: relative}\ndepth: {name: d, meaning: metric_depth}", "depth: an AuxUE has no depth output"},
		{"scale: {name: scale, units: relative}", "scale: {name: scale, units: relative}\nfeatures: [{name: f}]", "features: an AuxUE has no feature outputs"},
		{"scale: {name: scale, units: relative}", "scale: {name: scale, units: metres}", `scale.units: "metres" but depth_input.units "relative"`},
		{"scale: {name: scale, units: relative}", "scale: {name: epistemic, units: relative}", `epistemic.name: "epistemic" is also scale`},
		{"alpha: {name: alpha}", "alpha: {name: alpha, units: metres}", "alpha.units: only depth_input and scale have units"},
		{"kind: auxue", "kind: auxue2", `kind: "auxue2" is not one of depth, auxue`},
		{"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "XYZ", "auxue.depth_model_sha256"},
		{"factor: 4", "factor: -4", "auxue.factor: -4"},
		{"lambda: 0.01", "lambda: .nan", "auxue.lambda: NaN"},
		{"input: {name: image, layout: NHWC", "input: {name: depth, layout: NHWC", `depth_input.name: "depth" is also input`},
	}
	for _, tc := range tests {
		text := strings.Replace(auxSpecYAML, tc.old, tc.new, 1)
		if text == auxSpecYAML {
			t.Fatalf("edit %q did not apply", tc.old)
		}
		_, err := ParseIOSpec([]byte(text), "auxue.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "auxue.yaml") {
			t.Errorf("%s -> %s: err = %v, want %q", tc.old, tc.new, err, tc.want)
		}
	}
	// A depth spec may not carry AuxUE keys; ParseIOSpecKind sets or
	// checks the kind.
	if _, err := ParseIOSpec([]byte("input: {name: i, height: 2, width: 2}\ndepth: {name: d, meaning: relative}\nscale: {name: s}\n"), "d.yaml"); err == nil ||
		!strings.Contains(err.Error(), "scale: only an AuxUE") {
		t.Errorf("depth spec with scale: %v", err)
	}
	if _, err := ParseIOSpecKind([]byte(auxSpecYAML), "a.yaml", KindDepth); err == nil || !strings.Contains(err.Error(), `kind: "auxue", want "depth"`) {
		t.Errorf("auxue spec read as depth: %v", err)
	}
}

// TestNormalizeRGB8: x = p*range/255 - mean) / std in the spec's channel
// order and layout, for NCHW RGB and NHWC BGR with [0,255] scaling.
func TestNormalizeRGB8(t *testing.T) {
	const w, h = 3, 2
	pix := make([]byte, 3*w*h)
	for i := range pix {
		pix[i] = byte(37*i + 11)
	}
	for _, s := range []IOSpec{
		{Input: InputSpec{Name: "i", Height: h, Width: w, Mean: []float32{0.5, 0.4, 0.3}, Std: []float32{0.2, 0.25, 0.5}}},
		{Input: InputSpec{Name: "i", Layout: LayoutNHWC, Height: h, Width: w, Color: ColorBGR, PixelRange: 255, Mean: []float32{100, 110, 120}, Std: []float32{50, 60, 70}}},
	} {
		dst := make([]float32, 3*w*h)
		NormalizeRGB8(s.Pixels(), s.Layout() == LayoutNHWC, pix, w, h, 3*w, dst)
		pr := 1.0
		if s.Input.PixelRange == 255 {
			pr = 255
		}
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				for c := 0; c < 3; c++ {
					src := c
					if s.Input.Color == ColorBGR {
						src = 2 - c
					}
					want := (float64(pix[3*(y*w+x)+src])*pr/255 - float64(s.Input.Mean[c])) / float64(s.Input.Std[c])
					got := dst[c*w*h+y*w+x]
					if s.Layout() == LayoutNHWC {
						got = dst[3*(y*w+x)+c]
					}
					if math.Abs(float64(got)-want) > 1e-5*(1+math.Abs(want)) {
						t.Fatalf("%s %s (%d,%d,%d): %v, want %v", s.Layout(), s.Input.Color, x, y, c, got, want)
					}
				}
			}
		}
	}
}

func TestMapShape(t *testing.T) {
	for _, tc := range []struct {
		shape []int64
		h, w  int
		ok    bool
	}{{[]int64{1, 1, 4, 5}, 4, 5, true}, {[]int64{1, 4, 5}, 4, 5, true}, {[]int64{4, 5}, 4, 5, true}, {[]int64{1, 4, 5, 1}, 4, 5, true},
		{[]int64{1, 3, 4, 5}, 0, 0, false}, {[]int64{2, 4, 5}, 0, 0, false}, {[]int64{1, 1, 1, 4, 5}, 0, 0, false}, {[]int64{1, 0, 5}, 0, 0, false}} {
		h, w, err := MapShape(tc.shape)
		if (err == nil) != tc.ok || h != tc.h || w != tc.w {
			t.Errorf("%v: %dx%d %v", tc.shape, h, w, err)
		}
	}
}

// TestRelativeDepthInto: a relative model's read-out keeps the value
// (signs included) times the scale; only non-finite values are invalid.
func TestRelativeDepthInto(t *testing.T) {
	s := spec(1, 1, 4, MeaningRelative)
	s.Depth.Scale = 2
	sess := newSession(t, saveModel(t, affineModel(1, 1, 4, 1, 0)), s, onnxrt.Config{}, nil)
	copy(sess.Input(), []float32{-1, 0, 3, float32(math.Inf(1))})
	if _, err := sess.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := make([]float32, 4)
	invalid, err := sess.DepthInto(d)
	if err != nil {
		t.Fatal(err)
	}
	if invalid != 1 || d[0] != -2 || d[1] != 0 || d[2] != 6 || d[3] != 0 {
		t.Fatalf("relative read-out %v (%d invalid), want [-2 0 6 0] (1)", d, invalid)
	}
}

// TestCheckPair: the pair checks every entry point shares.
func TestCheckPair(t *testing.T) {
	depth := IOSpec{Input: InputSpec{Name: "input", Height: 8, Width: 8, PixelRange: 255}, Depth: OutputSpec{Name: "d", Meaning: MeaningRelative},
		Features: []FeatureSpec{{Name: "enc"}}}
	aux := IOSpec{Kind: KindAuxUE, Input: InputSpec{Name: "image", Height: 8, Width: 8, PixelRange: 255},
		DepthInput: TensorSpec{Name: "depth", Units: UnitsRelative}, Scale: TensorSpec{Name: "scale"}, Epistemic: TensorSpec{Name: "epistemic"}}
	feat := IOSpec{Kind: KindAuxUE, Input: InputSpec{Name: "features", Channels: 4, Height: 8, Width: 8}, Scale: TensorSpec{Name: "s"}, Epistemic: TensorSpec{Name: "e"}}
	bgr := aux
	bgr.Input.Color = ColorBGR
	metres := aux
	metres.DepthInput.Units = UnitsMetres
	for _, tc := range []struct {
		name   string
		d, a   IOSpec
		inputs []string
		want   string
	}{
		{"fits", depth, aux, nil, ""},
		{"features input", depth, feat, []string{"image", "enc"}, ""},
		{"another input", depth, bgr, nil, "input.color: depth model rgb, AuxUE bgr"},
		{"units", depth, metres, nil, `depth_input.units: "metres", but the depth model's depth.meaning "relative" gives relative`},
		{"inputs for a contract", depth, aux, []string{"image"}, "leave inputs out"},
		{"unknown source", depth, feat, []string{"image", "enc5"}, `auxue.inputs[1]: "enc5" is not one of image, depth, enc`},
		{"no sources", depth, feat, nil, "auxue.inputs: empty"},
		{"swapped", aux, depth, nil, "describes an AuxUE"},
	} {
		err := CheckPair(tc.d, tc.a, tc.inputs)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestModelsLetterboxAndFeaturesInput: a frame of another aspect ratio is
// letterboxed (the border rows of the depth model's input hold black) and
// the maps come back at the frame's size; a features-input AuxUE is fed
// the image and the depth it names.
func TestModelsLetterboxAndFeaturesInput(t *testing.T) {
	const h, w = 16, 16 // featuresPair's input
	pair := featuresPair(t)
	pair.depthSpec.Input.Resize = ResizeLetterbox
	m, err := OpenModels(context.Background(), ModelsConfig{Depth: pair.depth, DepthSpec: pair.depthSpec, AuxUE: pair.aux, AuxUESpec: pair.auxueSpec,
		AuxInputs: []string{SourceImage, SourceDepth}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const fw, fh = 32, 8 // aspect 4: content 16x4 at rows 6..9
	frame := make([]uint8, 3*fw*fh)
	for i := range frame {
		frame[i] = 200
	}
	maps, err := m.Infer(context.Background(), frame, fw, fh)
	if err != nil {
		t.Fatal(err)
	}
	if maps.Width != fw || maps.Height != fh || len(maps.Depth) != fw*fh || len(maps.Epistemic) != fw*fh {
		t.Fatalf("maps %dx%d with %d values, want the frame's %dx%d", maps.Width, maps.Height, len(maps.Depth), fw, fh)
	}
	in := m.DepthSession().Input()
	black, white := float32((0-0.5)/0.25), float32((200.0/255-0.5)/0.25)
	for y := 0; y < h; y++ {
		want := black
		if y >= 6 && y < 10 {
			want = white
		}
		if d := in[y*w+3] - want; d > 1e-5 || d < -1e-5 {
			t.Fatalf("input row %d: %v, want %v (letterbox rows 6-9)", y, in[y*w+3], want)
		}
	}
	// The AuxUE's features input is the image then the depth.
	feats := m.AuxUESession().Input()
	if feats[3*h*w] != m.depthOut[0] || feats[0] != in[0] {
		t.Fatal("features input is not image + depth")
	}
}
