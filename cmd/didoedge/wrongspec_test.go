package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/offline"
	"github.com/didoedge/didoedge/runtime/infer"
)

// TestWrongSpecAtEveryEntryPoint: a spec that does not match its model
// fails train auxue, eval-quick, calibrate, model run and run with exit
// code 1 (never a panic) and a message that names the model file and lists
// the spec and the model side by side. run and calibrate are also the
// regression tests of the start-up nil-pointer panic (runtime.OpenModels
// and stream.New on a model-loading error).
func TestWrongSpecAtEveryEntryPoint(t *testing.T) {
	dir := t.TempDir()
	model, spec := testmodels.Foreign(t, "midas", filepath.Join("..", "..", "models", "depth.onnx"), dir)
	// An AuxUE (untrained) for the MiDaS-like model, exported with its
	// input contract.
	ds, err := offline.ReadSpec(spec, infer.KindDepth)
	if err != nil {
		t.Fatal(err)
	}
	c, err := offline.AuxContract(ds, 4, 4, 80, true)
	if err != nil {
		t.Fatal(err)
	}
	m, err := auxue.NewModel(offline.AuxTrainConfig{AuxHeads: offline.AuxHeads{GlobalContext: true, GlobalContextBands: 4}}.AuxModelConfig(c.Channels()))
	if err != nil {
		t.Fatal(err)
	}
	aux, auxSpec, err := offline.WriteAuxArtifacts(m, c, ds, infer.AuxUEInfo{}, dir, "auxue")
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	cli(t, "sim", "render", "--world", "outdoor", "--frames", "9", "--drives", "3", "--size", "48x160", "--workers", "2", "--out", data)
	images := testImages(t, data)
	calFile := filepath.Join(dir, "calibration.yaml")
	f, err := os.Create(calFile)
	if err != nil {
		t.Fatal(err)
	}
	cal := alerts.DefaultCalibration()
	cal.Levels.PessimisticDepth = nil // a relative model has no metres
	if err := alerts.WriteCalibration(f, cal); err != nil {
		t.Fatal(err)
	}
	f.Close()

	// The spec names an output the model does not have (and a wrong one
	// of each kind below); the AuxUE still fits its input.
	wrong := map[string]string{
		"output name": strings.Replace(testmodels.MiDaSSpec, "name: predicted_depth", "name: depth", 1),
		"layout":      strings.Replace(testmodels.MiDaSSpec, "layout: NCHW", "layout: NHWC", 1),
	}
	wantParts := map[string][]string{
		"output name": {`depth: the model has no output "depth"`, "spec:  inputs [input NCHW [1 3 256 256]]; outputs [depth=depth]",
			"model: inputs [input float32 [1 3 256 256]]; outputs [predicted_depth float32 [1 256 256]]"},
		"layout": {`input: input "input" has shape [1 3 256 256], the spec gives NHWC [1 256 256 3]`, "spec:  inputs", "model: inputs"},
	}
	for name, text := range wrong {
		t.Run(name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "bad.yaml")
			if err := os.WriteFile(bad, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			badAux := auxSpec
			if name == "layout" { // the AuxUE must then claim the same input, or the pair check speaks first
				b, err := os.ReadFile(auxSpec)
				if err != nil {
					t.Fatal(err)
				}
				badAux = filepath.Join(t.TempDir(), "auxue.yaml")
				if err := os.WriteFile(badAux, []byte(strings.Replace(string(b), "layout: NCHW", "layout: NHWC", 1)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfgPath := filepath.Join(t.TempDir(), "run.yaml")
			cfg := fmt.Sprintf(`camera:
  sequence: {dir: %q}
depth: {model: %q, io_spec: %q}
auxue: {model: %q, description: %q}
alerts:
  vehicle: v
  camera: c
  calibration: %q
  grid: {rows: 1, cols: 2}
  mqtt: {broker: embedded, client_id: c}
  outbox: {dir: %q}
  embedded: {listen: "127.0.0.1:0", allow_anonymous: true}
http: {listen: "off"}
`, images, model, bad, aux, badAux, calFile, filepath.Join(t.TempDir(), "outbox"))
			if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{
				{"train", "auxue", "--depth", model, "--depth-spec", bad, "--data", data, "--cache-dir", "", "--checkpoint", "", "--summary", filepath.Join(t.TempDir(), "s.json"), "--progress=false"},
				{"eval-quick", "--depth", model, "--depth-spec", bad, "--auxue", aux, "--auxue-spec", badAux, "--data", data},
				{"calibrate", "--depth", model, "--depth-spec", bad, "--auxue", aux, "--auxue-spec", badAux, "--data", data, "--split", "all", "--out", filepath.Join(t.TempDir(), "c.yaml")},
				{"model", "run", "--images", images, "--depth", model, "--depth-spec", bad, "--auxue", aux, "--auxue-spec", badAux, "--out", t.TempDir()},
				{"run", "--config", cfgPath},
			} {
				msg := cliFails(t, args...)
				for _, p := range append(wantParts[name], model, bad) {
					if !strings.Contains(msg, p) {
						t.Errorf("didoedge %s: message lacks %q:\n%s", strings.Join(args[:2], " "), p, msg)
					}
				}
			}
		})
	}
}
