package testmodels

import (
	_ "embed" // foreign.py
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Python is Debian's interpreter with python3-onnx (the pyenv python3 first
// on PATH lacks Debian's modules).
const Python = "/usr/bin/python3"

// foreignScript builds the foreign models with Debian's python3-onnx
// (onnx.helper and onnx.compose), never with the project's exporter: a
// preprocessing graph and a postprocessing graph are merged around the
// reference depth graph, so the foreign models predict what the reference
// does, through another input contract and output convention.
//
//	midas: input "input" (1,3,256,256) NCHW RGB in [0,255]; /255, ImageNet
//	       mean/std, Resize to 192x640; the reference; Resize to 256x256;
//	       output "predicted_depth" (1,256,256) = A/d + B (relative
//	       inverse depth: an arbitrary affine map of 1/d).
//	negdisp: the reference's input; output "disp" (1,1,96,320) = NegDispA / d
//	       at half resolution (2x2 mean of d first): PyDNet-like negative
//	       disparity, larger = farther.
//	nhwc:  input "pixel_values" (N,192,640,3) NHWC BGR, already normalized
//	       with ImageNet mean/std (in BGR order); Transpose, Gather to RGB;
//	       the reference; outputs "brightness" (1,1,1,1), then "depth_m"
//	       (1,192,640,1) in metres.
//
//go:embed foreign.py
var foreignScript string

// Affine map of the MiDaS-like model's output: predicted_depth = A/d + B.
const (
	MiDaSA = 37.5
	MiDaSB = -0.2
)

// MiDaSSpec is the IO spec a user writes for the MiDaS-like model.
const MiDaSSpec = `# a MiDaS-like model: 256x256 RGB in [0,255], relative inverse depth out
input: {name: input, layout: NCHW, height: 256, width: 256, pixel_range: 255}
depth: {name: predicted_depth, meaning: relative}
`

// NHWCSpec is the IO spec of the NHWC metric model.
const NHWCSpec = `# a metric model: NHWC BGR input normalized with ImageNet statistics, depth (m) is its second output
input: {name: pixel_values, layout: NHWC, height: 192, width: 640, color: bgr, mean: [0.406, 0.456, 0.485], std: [0.225, 0.224, 0.229]}
depth: {name: depth_m, meaning: metric_depth}
`

// NegDispSpec is the right spec of the negdisp model: relative, the sign
// flipped so that larger is nearer.
const NegDispSpec = `# PyDNet-like: negative disparity at half resolution
input: {name: image, height: 192, width: 640, mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}
depth: {name: disp, meaning: relative, scale: -1}
`

// Foreign builds a foreign model ("midas" or "nhwc") around the reference
// depth graph at reference (a depth.onnx written by `didoedge train
// depth`) into dir, writes the spec a user would write beside it, and
// returns the model's and the spec's paths.
func Foreign(tb testing.TB, kind, reference, dir string) (model, spec string) {
	tb.Helper()
	if _, err := os.Stat(Python); err != nil {
		tb.Fatalf("python3-onnx: %v (run scripts/deps.sh)", err)
	}
	if _, err := os.Stat(reference); err != nil {
		tb.Fatalf("reference depth model: %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	model = filepath.Join(dir, kind+".onnx")
	a := "37.5"
	if kind == "negdisp" {
		a = "-0.3"
	}
	out, err := exec.Command(Python, "-c", foreignScript, kind, reference, model, a, "-0.2").CombinedOutput()
	if err != nil {
		tb.Fatalf("build the %s model with python3-onnx: %v\n%s", kind, err, out)
	}
	text := MiDaSSpec
	switch kind {
	case "nhwc":
		text = NHWCSpec
	case "negdisp":
		text = NegDispSpec
	}
	spec = strings.TrimSuffix(model, ".onnx") + ".yaml"
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
	return model, spec
}
