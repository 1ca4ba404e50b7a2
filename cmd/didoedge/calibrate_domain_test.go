package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/runtime/infer"
)

// TestCalibrateRefusesTheNewCamera: with the reference models and the
// training-domain record train auxue wrote into the AuxUE's spec (held-out
// drives of the training world), calibrate accepts in-domain frames
// (saying they passed the domain check, setting domain_threshold),
// refuses the same roads through the new camera, both as a sim render and
// as a plain folder of its pictures (symbolic links), with the numbers and
// the next step, calibrates them with --force and a warning, and
// calibrates with an AuxUE spec without a record with a warning that it
// cannot check (even the new camera's frames).
func TestCalibrateRefusesTheNewCamera(t *testing.T) {
	dir := t.TempDir()
	models := filepath.Join(dir, "models")
	if err := os.Mkdir(models, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"depth.onnx", "depth.yaml", "auxue.onnx", "auxue.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "models", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(models, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in, newcam := filepath.Join(dir, "in"), filepath.Join(dir, "newcam")
	cli(t, "sim", "render", "--world", "outdoor", "--frames", "12", "--drives", "3", "--seed", "777", "--size", "192x640", "--workers", "2", "--out", in)
	cli(t, "sim", "render", "--world", "outdoor", "--camera", "newcam", "--frames", "12", "--drives", "3", "--seed", "777", "--size", "192x640",
		"--workers", "2", "--out", newcam)
	pictures := filepath.Join(dir, "pictures")
	if err := os.Mkdir(pictures, 0o755); err != nil {
		t.Fatal(err)
	}
	frames, err := filepath.Glob(filepath.Join(newcam, "*", "image_02", "data", "*.png"))
	if err != nil || len(frames) != 12 {
		t.Fatalf("new camera frames: %v, %v", frames, err)
	}
	for _, f := range frames {
		if err := os.Symlink(f, filepath.Join(pictures, filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(f))))+"_"+filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
	}
	depth, aux := filepath.Join(models, "depth.onnx"), filepath.Join(models, "auxue.onnx")
	cal := filepath.Join(dir, "cal.yaml")

	out := cli(t, "calibrate", "--depth", depth, "--auxue", aux, "--data", in, "--split", "all", "--out", cal)
	if !strings.Contains(out, "domain check: 12 frames in the AuxUE's training domain") {
		t.Errorf("in-domain frames: no passed domain check in:\n%s", out)
	}
	// in-domain frames set the domain monitor's threshold
	if text, err := os.ReadFile(cal); err != nil || !strings.Contains(string(text), "domain_threshold: ") {
		t.Errorf("in-domain calibration without domain_threshold (%v):\n%s", err, text)
	}
	for _, data := range []string{newcam, pictures} {
		errOut := cliFails(t, "calibrate", "--depth", depth, "--auxue", aux, "--data", data, "--split", "all", "--out", cal)
		for _, want := range []string{"outside the AuxUE's training domain", "of 12 frames", "knn distance above",
			"Next step: train the AuxUE on this camera's data", "--force"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("%s: the refusal lacks %q:\n%s", data, want, errOut)
			}
		}
	}
	out = cli(t, "calibrate", "--depth", depth, "--auxue", aux, "--data", pictures, "--split", "all", "--force", "--out", cal)
	if !strings.Contains(out, "warning: calibrated with --force on frames the domain check refused") ||
		!strings.Contains(out, "calibrated on 12 all frames of "+pictures) || strings.Contains(out, "aligned to their ground truth") {
		t.Errorf("--force on the picture folder:\n%s", out)
	}
	// a forced calibration leaves the domain threshold to the record
	if text, err := os.ReadFile(cal); err != nil || strings.Contains(string(text), "domain_threshold: ") || !strings.Contains(string(text), "domain_forced") {
		t.Errorf("forced calibration sets domain_threshold or does not record the refusal (%v):\n%s", err, text)
	}

	// Without a record (the spec's auxue.domain removed): calibrated, with
	// the warning that the frames could not be checked.
	specPath := filepath.Join(models, "auxue.yaml")
	raw, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := infer.ParseIOSpecKind(raw, specPath, infer.KindAuxUE)
	if err != nil {
		t.Fatal(err)
	}
	if spec.AuxUE == nil || spec.AuxUE.Domain == nil {
		t.Fatal("the reference AuxUE's spec has no training-domain record")
	}
	info := *spec.AuxUE
	info.Domain = nil
	spec.AuxUE = &info
	text, err := spec.Marshal("the reference AuxUE without its record")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(specPath, text, 0o644); err != nil {
		t.Fatal(err)
	}
	out = cli(t, "calibrate", "--depth", depth, "--auxue", aux, "--data", newcam, "--split", "all", "--out", cal)
	if !strings.Contains(out, "warning: the AuxUE's spec has no training-domain record") {
		t.Errorf("calibrate without a record does not warn:\n%s", out)
	}
}
