package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const referenceDescription = `# IO of the didoedge reference AuxUE (auxue/depthnet); not a runtime/infer depth spec.
main_model: depth.onnx
input:
  name: features
  layout: NCHW
  shape: [1, 20, 96, 320]
outputs:
  - {name: scale, shape: [1, 1, 192, 640], meaning: laplace_scale_b_metres}
  - {name: epistemic, shape: [1, 1, 192, 640], meaning: dido_epistemic_k_over_s}
  - {name: alpha, shape: [1, 32, 96, 320], meaning: dirichlet_alpha_half_resolution}
auxue: {resolution: half, k: 32}
`

func TestParseAuxUEDescription(t *testing.T) {
	spec, err := ParseAuxUEDescription([]byte(referenceDescription), "auxue.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in := spec.Input
	if in.Name != "features" || in.Channels != 20 || in.Height != 96 || in.Width != 320 ||
		spec.Depth.Name != "scale" || len(spec.Features) != 1 || spec.Features[0].Name != "epistemic" {
		t.Fatalf("spec %+v", spec)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"bad shape", "input: {name: x, shape: [1, 4, -2, 3]}\n", "input.shape"},
		{"huge shape", "input: {name: x, shape: [1, 9223372036854775807, 2, 2]}\n", "input.shape"},
		{"no input name", "input: {shape: [1, 4, 2, 2]}\n", "input.name: empty"},
		{"no epistemic", "input: {name: x, shape: [1, 4, 2, 2]}\noutputs: [{name: s, meaning: laplace_scale_b_metres}]\n", "dido_epistemic_k_over_s"},
		{"same output twice", "input: {name: x, shape: [1, 4, 2, 2]}\noutputs:\n  - {name: o, meaning: laplace_scale_b_metres}\n  - {name: o, meaning: dido_epistemic_k_over_s}\n", `both "o"`},
		{"not yaml", "input: [", "auxue.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseAuxUEDescription([]byte(tc.text), "auxue.yaml")
			mustContain(t, err, tc.want)
		})
	}
}

// TestConfigAuxUEDescription: auxue.description replaces io, and the
// AuxUE's input defaults to the depth model's first extra output.
func TestConfigAuxUEDescription(t *testing.T) {
	dir := configDir(t)
	if err := os.WriteFile(filepath.Join(dir, "auxue.yaml"), []byte(referenceDescription), 0o644); err != nil {
		t.Fatal(err)
	}
	text := validConfig()
	i := strings.Index(text, "  io:\n    input: {name: features")
	j := strings.Index(text, "  inputs: [image, depth]\n")
	text = text[:i] + "  description: auxue.yaml\n" + text[j+len("  inputs: [image, depth]\n"):]
	cfg, err := Parse("cfg.yaml", []byte(text), dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AuxUE.IO == nil || cfg.AuxUE.IO.Input.Channels != 20 || cfg.AuxUE.IO.Depth.Name != "scale" {
		t.Fatalf("auxue io %+v", cfg.AuxUE.IO)
	}
	if strings.Join(cfg.AuxUE.Inputs, ",") != "features" {
		t.Fatalf("inputs %v, want the depth model's feature output", cfg.AuxUE.Inputs)
	}
	both := strings.Replace(text, "  description: auxue.yaml\n", "  description: auxue.yaml\n  io_spec: auxue.yaml\n", 1)
	_, err = Parse("cfg.yaml", []byte(both), dir)
	mustContain(t, err, "auxue: description, io_spec and io are exclusive")
	missing := strings.Replace(text, "description: auxue.yaml", "description: gone.yaml", 1)
	_, err = Parse("cfg.yaml", []byte(missing), dir)
	mustContain(t, err, "auxue.description", "gone.yaml")
}

func FuzzParseAuxUEDescription(f *testing.F) {
	f.Add(referenceDescription)
	f.Add("input: {name: x, shape: [1, 9223372036854775807, 2, 2]}\n")
	f.Add("outputs: [{name: '', meaning: x}]\n")
	f.Fuzz(func(t *testing.T, text string) {
		spec, err := ParseAuxUEDescription([]byte(text), "fuzz.yaml")
		if err == nil && (spec.Input.Channels < 1 || spec.Input.Height < 1 || spec.Input.Width < 1 || spec.Depth.Name == "") {
			t.Fatalf("accepted %+v from %q", spec, text)
		}
	})
}
