package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/internal/testmodels"
)

// TestProbeCatchesWrongSign: the PyDNet-like model (the reference depth
// graph with negative disparity -0.3/d at half resolution) probed on a
// simulated frame whose depth is known: without a spec the probe reads
// the raw output, finds it negative and larger where the true depth is
// larger, and proposes scale: -1; the right spec agrees; a spec without
// the sign, or a disparity with a positive scale, fails with the reason.
func TestProbeCatchesWrongSign(t *testing.T) {
	dir := t.TempDir()
	model, spec := testmodels.Foreign(t, "negdisp", filepath.Join("..", "..", "models", "depth.onnx"), dir)
	out := cli(t, "model", "inspect", model, "--probe")
	for _, want := range []string{"output:     disp, 320x96 for a 640x192 input", "all negative", "larger where the true depth is larger",
		"depth: {name: disp, meaning: relative, scale: -1}", "depth: {name: disp, meaning: disparity, scale: -F}"} {
		if !strings.Contains(out, want) {
			t.Errorf("probe without a spec lacks %q:\n%s", want, out)
		}
	}
	out = cli(t, "model", "inspect", model, "--probe", "--spec", spec)
	if !strings.Contains(out, "declaration agrees with the evidence") {
		t.Errorf("probe of the right spec:\n%s", out)
	}
	for _, tc := range []struct{ depth, want string }{
		{"depth: {name: disp, meaning: relative}", "reads larger raw values as nearer, but they are larger where the true depth is larger"},
		{"depth: {name: disp, meaning: disparity, scale: 0.3}", "reads larger raw values as nearer"},
		{"depth: {name: disp, meaning: metric_depth}", "reads 122880 of 122880 pixels as no depth"},
	} {
		bad := filepath.Join(dir, "bad.yaml")
		text := strings.Replace(testmodels.NegDispSpec, "depth: {name: disp, meaning: relative, scale: -1}", tc.depth, 1)
		if err := os.WriteFile(bad, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		errOut := cliFails(t, "model", "inspect", model, "--probe", "--spec", bad)
		if !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "contradicts") {
			t.Errorf("%s: stderr lacks %q:\n%s", tc.depth, tc.want, errOut)
		}
	}
	// On an --image the depth is unknown: the evidence is the rows', and
	// the sentence reads "but in this image values grow toward the top".
	r, err := sim.NewRenderer(sim.Config{World: sim.WorldOutdoor, Width: 640, Height: 192, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	f := sim.NewFrame(640, 192)
	if err := r.Render(0, f); err != nil {
		t.Fatal(err)
	}
	var png bytes.Buffer
	if err := dataset.EncodeRGBPNG(&png, 640, 192, f.RGB); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "frame.png")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(img, png.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(strings.Replace(testmodels.NegDispSpec, "depth: {name: disp, meaning: relative, scale: -1}",
		"depth: {name: disp, meaning: relative}", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	errOut := cliFails(t, "model", "inspect", model, "--probe", "--spec", bad, "--image", img)
	if want := "reads larger raw values as nearer, but in this image values grow toward the top of the image"; !strings.Contains(errOut, want) ||
		strings.Contains(errOut, "they are values") {
		t.Errorf("--image mismatch: stderr lacks %q:\n%s", want, errOut)
	}
}
