package testmodels

import (
	"fmt"
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
const foreignScript = `
import sys, onnx
from onnx import helper, TensorProto, numpy_helper, compose
import numpy as np

kind, ref_path, out_path, a, b = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
ref = onnx.load(ref_path)
ref_in, ref_out = ref.graph.input[0].name, "depth"
opset = [helper.make_opsetid("", 17)]
mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
std = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)

def model(nodes, inputs, outputs, inits, name):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    m = helper.make_model(g, opset_imports=opset, producer_name="python3-onnx test")
    m.ir_version = ref.ir_version
    return m

if kind == "midas":
    pre = model([
        helper.make_node("Div", ["input", "k255"], ["x01"]),
        helper.make_node("Sub", ["x01", "mean"], ["xc"]),
        helper.make_node("Div", ["xc", "std"], ["xn"]),
        helper.make_node("Resize", ["xn", "", "", "size_in"], [ref_in], mode="linear", coordinate_transformation_mode="half_pixel"),
    ], [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 256, 256])],
       [helper.make_tensor_value_info(ref_in, TensorProto.FLOAT, [1, 3, 192, 640])],
       [numpy_helper.from_array(np.array(255, np.float32), "k255"), numpy_helper.from_array(mean, "mean"),
        numpy_helper.from_array(std, "std"), numpy_helper.from_array(np.array([1, 3, 192, 640], np.int64), "size_in")], "pre")
    post = model([
        helper.make_node("Resize", [ref_out, "", "", "size_out"], ["d256"], mode="linear", coordinate_transformation_mode="half_pixel"),
        helper.make_node("Reciprocal", ["d256"], ["inv"]),
        helper.make_node("Mul", ["inv", "ka"], ["inv_a"]),
        helper.make_node("Add", ["inv_a", "kb"], ["rel4"]),
        helper.make_node("Squeeze", ["rel4", "axis1"], ["predicted_depth"]),
    ], [helper.make_tensor_value_info(ref_out, TensorProto.FLOAT, [1, 1, 192, 640])],
       [helper.make_tensor_value_info("predicted_depth", TensorProto.FLOAT, [1, 256, 256])],
       [numpy_helper.from_array(np.array([1, 1, 256, 256], np.int64), "size_out"), numpy_helper.from_array(np.array(a, np.float32), "ka"),
        numpy_helper.from_array(np.array(b, np.float32), "kb"), numpy_helper.from_array(np.array([1], np.int64), "axis1")], "post")
    outputs = ["predicted_depth"]
elif kind == "negdisp":
    post = model([
        helper.make_node("AveragePool", [ref_out], ["d_half"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reciprocal", ["d_half"], ["inv"]),
        helper.make_node("Mul", ["inv", "ka"], ["disp"]),
    ], [helper.make_tensor_value_info(ref_out, TensorProto.FLOAT, [1, 1, 192, 640])],
       [helper.make_tensor_value_info("disp", TensorProto.FLOAT, [1, 1, 96, 320])],
       [numpy_helper.from_array(np.array(a, np.float32), "ka")], "post")
    m = compose.merge_models(ref, post, io_map=[(ref_out, ref_out)], outputs=["disp"])
    m.producer_name = "python3-onnx test (negdisp)"
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, out_path)
    sys.exit(0)
else:
    pre = model([
        helper.make_node("Transpose", ["pixel_values"], ["nchw_bgr"], perm=[0, 3, 1, 2]),
        helper.make_node("Gather", ["nchw_bgr", "bgr_to_rgb"], [ref_in], axis=1),
    ], [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["N", 192, 640, 3])],
       [helper.make_tensor_value_info(ref_in, TensorProto.FLOAT, [1, 3, 192, 640])],
       [numpy_helper.from_array(np.array([2, 1, 0], np.int64), "bgr_to_rgb")], "pre")
    post = model([
        helper.make_node("ReduceMean", [ref_in], ["brightness"], keepdims=1),
        helper.make_node("Transpose", [ref_out], ["depth_m"], perm=[0, 2, 3, 1]),
    ], [helper.make_tensor_value_info(ref_in, TensorProto.FLOAT, [1, 3, 192, 640]),
        helper.make_tensor_value_info(ref_out, TensorProto.FLOAT, [1, 1, 192, 640])],
       [helper.make_tensor_value_info("brightness", TensorProto.FLOAT, [1, 1, 1, 1]),
        helper.make_tensor_value_info("depth_m", TensorProto.FLOAT, [1, 192, 640, 1])], [], "post")
    outputs = ["brightness", "depth_m"]

core = compose.merge_models(pre, ref, io_map=[(ref_in, ref_in)], outputs=[ref_in, ref_out])
io = [(ref_out, ref_out)]
if kind != "midas":
    io = [(ref_in, ref_in), (ref_out, ref_out)]
m = compose.merge_models(core, post, io_map=io, outputs=outputs)
m.producer_name = "python3-onnx test (" + kind + ")"
onnx.checker.check_model(m, full_check=True)
onnx.save(m, out_path)
`

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
	model, spec, err := BuildForeign(kind, reference, dir)
	if err != nil {
		tb.Fatal(err)
	}
	return model, spec
}

// BuildForeign is Foreign outside a test (cmd/foreignmodel: the foreign
// models of measurements that run as commands).
func BuildForeign(kind, reference, dir string) (model, spec string, err error) {
	if _, err := os.Stat(Python); err != nil {
		return "", "", fmt.Errorf("python3-onnx: %w (run scripts/deps.sh)", err)
	}
	if _, err := os.Stat(reference); err != nil {
		return "", "", fmt.Errorf("reference depth model: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	model = filepath.Join(dir, kind+".onnx")
	a := "37.5"
	if kind == "negdisp" {
		a = "-0.3"
	}
	out, err := exec.Command(Python, "-c", foreignScript, kind, reference, model, a, "-0.2").CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("build the %s model with python3-onnx: %w\n%s", kind, err, out)
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
		return "", "", err
	}
	return model, spec, nil
}
