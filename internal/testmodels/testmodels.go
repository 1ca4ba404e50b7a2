package testmodels

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/auxue/onnx"
)

// Input size of both models.
const (
	Height = 32
	Width  = 64
)

// File names of the reference model layout (runtime/demo's names, which
// `didoedge demo` and `didoedge calibrate --models` read).
const (
	DepthFile       = "depth.onnx"
	AuxUEFile       = "auxue.onnx"
	DepthIOSpecFile = "depth.yaml"
	ManifestFile    = "MANIFEST"
)

// DepthIOSpec is the runtime/infer IO spec of the depth model, the content
// of the reference layout's depth.yaml.
const DepthIOSpec = "input: {name: image, height: 32, width: 64}\ndepth: {name: depth, meaning: metric_depth}\n"

// RuntimeConfig is the part of a runtime configuration (runtime.Load) that
// runs the models Write wrote into the config's directory, on ONNX
// Runtime's CPU provider with one thread: its inference, depth and auxue
// sections. Tests add the camera, alerts and http sections around it.
const RuntimeConfig = `inference: {providers: [{name: cpu}], intra_op_threads: 1}
depth:
  model: depth.onnx
  io: {input: {name: image, height: 32, width: 64}, depth: {name: depth, meaning: metric_depth}}
auxue:
  model: auxue.onnx
  io: {input: {name: features, channels: 4, height: 32, width: 64}, depth: {name: scale, meaning: metric_depth}, features: [{name: epistemic}]}
`

// Files are the paths of the files Write or WriteReference wrote.
type Files struct {
	Depth, AuxUE string
	// DepthIOSpec and Manifest are set by WriteReference only.
	DepthIOSpec, Manifest string
}

// Write writes depth.onnx and auxue.onnx into dir (created if missing).
// The weights are seeded, so every call writes the same bytes: a TinyUNet
// with base 4 channels (PCG seed 7, 1) and a dense AuxUE with shared
// encoder, width 4, hidden 4, K = 8, lambda 0.01, seed 3.
func Write(tb testing.TB, dir string) Files {
	tb.Helper()
	unet, err := onnx.NewTinyUNet(4, rand.New(rand.NewPCG(7, 1)))
	if err != nil {
		tb.Fatal(err)
	}
	depth, err := unet.Export([]int64{1, 3, Height, Width})
	if err != nil {
		tb.Fatal(err)
	}
	am, err := auxue.NewModel(auxue.Config{Form: auxue.FormDense, In: 4, EncoderWidth: 4, SharedEncoder: true,
		Hidden: 4, K: 8, Lambda: 0.01, Seed: 3})
	if err != nil {
		tb.Fatal(err)
	}
	aux, err := onnx.ExportAuxUE(am, []int64{1, 4, Height, Width})
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	f := Files{Depth: filepath.Join(dir, DepthFile), AuxUE: filepath.Join(dir, AuxUEFile)}
	if err := onnx.WriteFile(f.Depth, depth); err != nil {
		tb.Fatal(err)
	}
	if err := onnx.WriteFile(f.AuxUE, aux); err != nil {
		tb.Fatal(err)
	}
	return f
}

// WriteReference writes the models in the reference layout: Write's two
// models plus depth.yaml (DepthIOSpec) and a MANIFEST with the sha256 of
// each (the demo checks them).
func WriteReference(tb testing.TB, dir string) Files {
	tb.Helper()
	f := Write(tb, dir)
	f.DepthIOSpec, f.Manifest = filepath.Join(dir, DepthIOSpecFile), filepath.Join(dir, ManifestFile)
	if err := os.WriteFile(f.DepthIOSpec, []byte(DepthIOSpec), 0o644); err != nil {
		tb.Fatal(err)
	}
	var m strings.Builder
	m.WriteString("# test models with random weights (internal/testmodels)\n")
	for _, p := range []string{f.Depth, f.DepthIOSpec, f.AuxUE} {
		data, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(&m, "\nfile: %s\nsha256: %x\ncommand: internal/testmodels.WriteReference (seeded random weights)\n",
			filepath.Base(p), sha256.Sum256(data))
	}
	if err := os.WriteFile(f.Manifest, []byte(m.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	return f
}
