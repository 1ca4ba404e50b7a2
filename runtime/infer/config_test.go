package infer

import (
	"reflect"
	"strings"
	"testing"
)

// normalize maps empty and nil slices to nil (YAML writes neither).
func normalize(s IOSpec) IOSpec {
	if len(s.Input.Mean) == 0 {
		s.Input.Mean = nil
	}
	if len(s.Input.Std) == 0 {
		s.Input.Std = nil
	}
	if len(s.Features) == 0 {
		s.Features = nil
	}
	return s
}

const goodSpec = `
input: {name: image, layout: NCHW, channels: 3, height: 192, width: 640, mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}
depth: {name: depth, meaning: disparity, scale: 0.54}
features: [{name: enc4}]
`

func TestParseIOSpec(t *testing.T) {
	s, err := ParseIOSpec([]byte(goodSpec), "model.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Input.Width != 640 || s.Depth.Scale != 0.54 || s.Features[0].Name != "enc4" || s.Input.Std[2] != 0.225 {
		t.Fatalf("parsed %+v", s)
	}
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown key", "input: {name: image, height: 2, width: 2, colour: rgb}\ndepth: {name: d, meaning: metric_depth}", "field colour not found"},
		{"bad meaning", "input: {name: image, height: 2, width: 2}\ndepth: {name: d, meaning: depthish}", `depth.meaning: "depthish"`},
		{"no input name", "input: {height: 2, width: 2}\ndepth: {name: d, meaning: metric_depth}", "input.name: empty"},
		{"layout", "input: {name: i, layout: NWCH, height: 2, width: 2}\ndepth: {name: d, meaning: metric_depth}", `input.layout: "NWCH" is not one of NCHW, NHWC`},
		{"mean count", "input: {name: i, height: 2, width: 2, mean: [0.5]}\ndepth: {name: d, meaning: metric_depth}", "input.mean: 1 values for 3 channels"},
		{"zero std", "input: {name: i, height: 2, width: 2, std: [1, 0, 1]}\ndepth: {name: d, meaning: metric_depth}", "input.std[1]"},
		{"scale not finite", "input: {name: i, height: 2, width: 2}\ndepth: {name: d, meaning: metric_depth, scale: .inf}", "depth.scale: +Inf is not finite"},
		{"negative sigmoid factor", "input: {name: i, height: 2, width: 2}\ndepth: {name: d, meaning: sigmoid_disparity, min_depth: 0.1, max_depth: 100, scale: -1}", "depth.scale: -1: a sigmoid_disparity"},
		{"sigmoid bounds", "input: {name: i, height: 2, width: 2}\ndepth: {name: d, meaning: sigmoid_disparity, min_depth: 10, max_depth: 1}", "depth.min_depth 10 and depth.max_depth 1"},
		{"sigmoid without bounds", "input: {name: i, height: 2, width: 2}\ndepth: {name: d, meaning: sigmoid_disparity}", "sigmoid_disparity needs 0 < min_depth < max_depth"},
		{"bounds on disparity", "input: {name: i, height: 2, width: 2}\ndepth: {name: d, meaning: disparity, max_depth: 80}", "depth.min_depth, depth.max_depth: only meaning sigmoid_disparity"},
		{"relative shift", "input: {name: i, height: 2, width: 2}\ndepth: {name: d, meaning: relative, shift: 1}", "depth.shift: 1: a relative output takes no shift"},
		{"canonical focal on relative", "input: {name: i, height: 2, width: 2}\ndepth: {name: d, meaning: relative, canonical_focal: 1000}", "depth.canonical_focal: only meanings metric_depth, disparity and inverse_depth"},
		{"negative canonical focal", "input: {name: i, height: 2, width: 2}\ndepth: {name: d, meaning: metric_depth, canonical_focal: -5}", "depth.canonical_focal: -5 must be positive"},
		{"unknown depth key", "input: {name: i, height: 2, width: 2}\ndepth: {name: d, meaning: metric_depth, offset: 1}", "field offset not found"},
		{"multiple", "input: {name: i, height: 520, width: 518, multiple: 14}\ndepth: {name: d, meaning: relative}", "input.height: 520 is not a multiple of 14 (input.multiple); use 518 or 532"},
		{"negative multiple", "input: {name: i, height: 2, width: 2, multiple: -14}\ndepth: {name: d, meaning: relative}", "input.multiple: -14 is out of range"},
		{"overflowing transform", "input: {name: i, height: 2, width: 2}\ndepth: {name: d, meaning: sigmoid_disparity, min_depth: 1, max_depth: 1.0000001, scale: 3e38}", "out of float32's range"},
		{"duplicate feature", "input: {name: i, height: 2, width: 2}\ndepth: {name: d, meaning: metric_depth}\nfeatures: [{name: d}]", `features[0].name: "d" is also depth`},
		{"no size", "input: {name: i}\ndepth: {name: d, meaning: metric_depth}", "must be in [1, 16384]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseIOSpec([]byte(tc.yaml), "model.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "model.yaml") {
				t.Fatalf("err = %v, want %q and the file name", err, tc.want)
			}
		})
	}
}

func FuzzParseIOSpec(f *testing.F) {
	f.Add([]byte(goodSpec))
	f.Add([]byte("input: {name: i, height: 2, width: 2}\ndepth: {name: d, meaning: metric_depth}"))
	f.Add([]byte("input: [1, 2]"))
	f.Add([]byte("{{{"))
	f.Add([]byte(auxSpecYAML))
	f.Add([]byte("kind: auxue\ninput: {name: f, channels: 5, height: 4, width: 4}\nscale: {name: s}\nepistemic: {name: e}\n"))
	f.Add([]byte("input: {name: i, layout: NHWC, height: 518, width: 518, color: bgr, pixel_range: 255}\ndepth: {name: d, meaning: relative}\n"))
	f.Add([]byte("input: {name: i, height: 518, width: 686, multiple: 14}\ndepth: {meaning: disparity, scale: -0.3, shift: 0.1}\n"))
	f.Add([]byte("input: {name: i, height: 2, width: 2}\ndepth: {name: disp, meaning: sigmoid_disparity, min_depth: 0.1, max_depth: 100, scale: 5.4}\n"))
	f.Add([]byte("input: {name: i, height: 2, width: 2}\ndepth: {name: d, meaning: metric_depth, canonical_focal: 1000}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseIOSpec(data, "fuzz.yaml")
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted spec fails Validate: %v", err)
		}
		if s.Input.Height <= 0 || s.Input.Width <= 0 || s.Input.Name == "" || !finite32(s.scale()) {
			t.Fatalf("accepted invalid spec %+v", s)
		}
		if m := s.Input.Multiple; m > 1 && (s.Input.Height%m != 0 || s.Input.Width%m != 0) {
			t.Fatalf("accepted sides %dx%d that are not multiples of %d", s.Input.Width, s.Input.Height, m)
		}
		if !s.IsAuxUE() {
			// Every accepted transform folds into finite constants.
			r := s.Depth.Readout(1.5)
			if !finite32(r.A) || !finite32(r.B) {
				t.Fatalf("accepted %+v folds into %+v", s.Depth, r)
			}
		}
		// What the parser accepts, the writer writes and the parser reads back.
		out, err := s.Marshal("fuzz")
		if err != nil {
			t.Fatalf("accepted spec does not marshal: %v", err)
		}
		back, err := ParseIOSpec(out, "fuzz-out.yaml")
		if err != nil {
			t.Fatalf("marshalled spec does not parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(normalize(back), normalize(s)) {
			t.Fatalf("round trip changed %+v into %+v", s, back)
		}
	})
}
