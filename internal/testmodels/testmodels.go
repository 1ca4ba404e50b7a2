package testmodels

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/auxue/onnxexport"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/pkg/onnx"
)

// Input size of both models.
const (
	Height = 32
	Width  = 64
)

// File names of the reference model layout (runtime/apps/demo's names, which
// `didoedge demo` and `didoedge calibrate --models` read).
const (
	DepthFile        = "depth.onnx"
	AuxUEFile        = "auxue.onnx"
	DepthIOSpecFile  = "depth.yaml"
	AuxUEIOSpecFile  = "auxue.yaml"
	ManifestFile     = "MANIFEST"
	auxFactor        = 4
	auxGlobalContext = 2
)

// DepthIOSpec is the runtime/infer IO spec of the depth model, the content
// of the reference layout's depth.yaml.
const DepthIOSpec = "input: {name: image, height: 32, width: 64}\ndepth: {name: depth, meaning: metric_depth}\n"

// AuxUEIOSpec is the AuxUE's spec, the content of auxue.yaml: it reads the
// depth model's image input and its depth in metres (the input contract).
const AuxUEIOSpec = `kind: auxue
input: {name: image, height: 32, width: 64}
depth_input: {name: depth, units: metres}
scale: {name: scale, units: metres}
epistemic: {name: epistemic}
alpha: {name: alpha}
`

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
  io: {kind: auxue, input: {name: image, height: 32, width: 64}, depth_input: {name: depth, units: metres}, scale: {name: scale, units: metres}, epistemic: {name: epistemic}}
`

// Files are the paths of the files Write or WriteReference wrote.
type Files struct {
	Depth, AuxUE string
	// DepthIOSpec, AuxUEIOSpec and Manifest are set by WriteReference only.
	DepthIOSpec, AuxUEIOSpec, Manifest string
}

// Write writes depth.onnx and auxue.onnx into dir (created if missing).
// The weights are seeded, so every call writes the same bytes: a TinyUNet
// with base 4 channels (PCG seed 7, 1) and a dense AuxUE with shared
// encoder, width 4, hidden 4, K = 8, lambda 0.01, seed 3, exported with its
// input contract (the depth model's image input, its depth in metres up to
// 80 m, blocks of 4 x 4 pixels, the row coordinate, 2 context bands).
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
	img, err := auxue.ImageFromPixels(false, 3, [3]int{0, 1, 2}, [3]float32{1. / 255, 1. / 255, 1. / 255}, [3]float32{})
	if err != nil {
		tb.Fatal(err)
	}
	contract := auxue.InputContract{Height: Height, Width: Width, Image: img, Factor: auxFactor,
		Bands: auxGlobalContext, MaxDepth: 80, Row: true}
	am, err := auxue.NewModel(auxue.Config{Form: auxue.FormDense, In: contract.Channels(), EncoderWidth: 4, SharedEncoder: true,
		Hidden: 4, K: 8, Lambda: 0.01, GlobalContext: true, GlobalContextBands: auxGlobalContext, Seed: 3})
	if err != nil {
		tb.Fatal(err)
	}
	aux, err := onnxexport.ExportAuxUEContract(am, contract)
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
// models plus depth.yaml (DepthIOSpec), auxue.yaml (AuxUEIOSpec) and a
// MANIFEST with the sha256 of each (the demo checks them).
func WriteReference(tb testing.TB, dir string) Files {
	tb.Helper()
	f := Write(tb, dir)
	f.DepthIOSpec, f.Manifest = filepath.Join(dir, DepthIOSpecFile), filepath.Join(dir, ManifestFile)
	f.AuxUEIOSpec = filepath.Join(dir, AuxUEIOSpecFile)
	if err := os.WriteFile(f.DepthIOSpec, []byte(DepthIOSpec), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(f.AuxUEIOSpec, []byte(AuxUEIOSpec), 0o644); err != nil {
		tb.Fatal(err)
	}
	var m strings.Builder
	m.WriteString("# test models with random weights (internal/testmodels)\n")
	for _, p := range []string{f.Depth, f.DepthIOSpec, f.AuxUE, f.AuxUEIOSpec} {
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
