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

// TestAuxUEDescriptionBins: a description whose k contradicts its own
// alpha output, or the model's, is refused (issue 16: k: 1 against the
// 32-bin reference model was accepted); the reference description passes
// against the reference model.
func TestAuxUEDescriptionBins(t *testing.T) {
	for _, tc := range []struct{ name, k, alpha, want string }{
		{"one bin", "1", "[1, 1, 96, 320]", "auxue.k: 1, want 2..4096"},
		{"k against its alpha", "16", "[1, 32, 96, 320]", "auxue.k: 16, but outputs[2] (alpha) has 32 channels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(strings.Replace(referenceDescription, "k: 32", "k: "+tc.k, 1), "[1, 32, 96, 320]", tc.alpha, 1)
			_, err := ParseAuxUEDescription([]byte(text), "auxue.yaml")
			mustContain(t, err, tc.want)
		})
	}
	ref, err := os.ReadFile(filepath.Join("..", "models", "auxue.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join("..", "models", "auxue.onnx")
	if err := CheckAuxUEModel(ref, "models/auxue.yaml", model); err != nil {
		t.Fatalf("the reference description against the reference model: %v", err)
	}
	// k and the alpha shape both edited to one bin: only the model can tell.
	lie := strings.Replace(strings.Replace(string(ref), "k: 32", "k: 2", 1), "shape: [1, 32, 48, 160]", "shape: [1, 2, 48, 160]", 1)
	if _, err := ParseAuxUEDescription([]byte(lie), "auxue.yaml"); err != nil {
		t.Fatalf("a self-consistent description: %v", err)
	}
	err = CheckAuxUEModel([]byte(lie), "auxue.yaml", model)
	mustContain(t, err, "auxue.yaml: outputs[2] (alpha): shape [1 2 48 160], but", "declares [1 32 48 160]")
	noShape := strings.Replace(lie, ", shape: [1, 2, 48, 160]", "", 1)
	err = CheckAuxUEModel([]byte(noShape), "auxue.yaml", model)
	mustContain(t, err, "auxue.k: 2, but", `alpha output "alpha" has 32 bins`)
	renamed := strings.Replace(string(ref), "name: epistemic,", "name: ks,", 1)
	err = CheckAuxUEModel([]byte(renamed), "auxue.yaml", model)
	mustContain(t, err, `outputs[1]: "ks" is not an output of`)
}
