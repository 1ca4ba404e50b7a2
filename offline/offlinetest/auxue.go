package offlinetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/auxue/onnxexport"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/offline"
	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/infer"
)

// AuxUE writes into dir a random-weight AuxUE with the input contract of
// the depth model whose spec is depthSpec (what train auxue exports for
// it, factor 4, the depth capped at 80 m, with the row coordinate) and its
// spec, named after the depth spec: NAME-auxue.onnx and NAME-auxue.yaml.
func AuxUE(t testing.TB, depthSpec, dir string) (model, spec string) {
	t.Helper()
	ds, err := offline.ReadSpec(depthSpec, infer.KindDepth)
	if err != nil {
		t.Fatal(err)
	}
	c, err := offline.AuxContract(ds, 4, 2, 80, true)
	if err != nil {
		t.Fatal(err)
	}
	am, err := auxue.NewModel(auxue.Config{Form: auxue.FormDense, In: c.Channels(), EncoderWidth: 4, SharedEncoder: true,
		Hidden: 4, K: 8, Lambda: 0.01, GlobalContext: true, GlobalContextBands: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnxexport.ExportAuxUEContract(am, c)
	if err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSuffix(filepath.Base(depthSpec), ".yaml") + "-auxue"
	model, spec = filepath.Join(dir, base+".onnx"), filepath.Join(dir, base+".yaml")
	if err := onnx.WriteFile(model, m); err != nil {
		t.Fatal(err)
	}
	b, err := offline.AuxUESpec(ds, c, am, infer.AuxUEInfo{}).Marshal("test AuxUE with random weights")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return model, spec
}
