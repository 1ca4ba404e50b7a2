package testmodels

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// Output conventions of published depth networks, as tiny models built by
// Debian's python3-onnx (never by the project's exporter). Each computes
// one known depth from its image, the closed form ConventionDepth,
//
//	d = ConvD0 + ConvD1 * m,  m = the mean of the three channels in [0, 1],
//
// and writes it out in its convention, so that a test knows every output
// value: the spec's transform must give d back.
//
//	negdisp     PyDNet-like negative disparity: disp = -ConvNegDisp / d (larger = farther).
//	sigmoid     monodepth2 stereo: sigma with d = ConvStereo / (1/max + (1/min - 1/max) sigma),
//	            min ConvMinDepth, max ConvMaxDepth.
//	canonical   Metric3D: pred = d * ConvCanonical / ConvFocalInput, the depth a camera of
//	            focal ConvCanonical would see; rank 3 (1,H,W).
//	multiscale  three metric outputs, coarse first: depth_s4 (H/4) = pool4(d) + 2,
//	            depth_s2 (H/2) = pool2(d) + 1, depth_s1 (H) = d.
//	uint8       a TFLite-converted graph: uint8 NHWC input "input_1" of raw pixels,
//	            output "Identity" (1,H,W,1) metres.
//	half        a float16 export: float16 input, float16 output "inv_depth" = 1/d.
//	vit         a ViT-like relative model: sides dynamic, patchified by 14 (a side that
//	            is not a multiple fails in Reshape), output "predicted_depth" (1,H,W) =
//	            MiDaSA / d + MiDaSB.
const conventionScript = `
import sys, onnx
from onnx import helper, TensorProto, numpy_helper
import numpy as np

kind, out_path, H, W = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
D0, D1, NEG, STEREO, MIN, MAX, CAN, FIN, A, B = [float(v) for v in sys.argv[5:15]]
F, I = TensorProto.FLOAT, TensorProto.INT64
nodes, inits = [], []
def const(name, v, dt=np.float32):
    inits.append(numpy_helper.from_array(np.array(v, dt), name))
    return name
def node(op, ins, out, **kw):
    nodes.append(helper.make_node(op, ins, [out], **kw))
    return out

def depth(x):
    m = node("ReduceMean", [x], "m", axes=[1], keepdims=1)
    return node("Add", [node("Mul", [m, const("d1", D1)], "m_d1"), const("d0", D0)], "d")

inputs = [helper.make_tensor_value_info("image", F, [1, 3, H, W])]
if kind == "negdisp":
    d = depth("image")
    node("Div", [const("negc", -NEG), d], "disp")
    outputs = [helper.make_tensor_value_info("disp", F, [1, 1, H, W])]
elif kind == "sigmoid":
    d = depth("image")
    inv = node("Div", [const("stereo", STEREO), d], "inv")
    lo, hi = 1 / MAX, 1 / MIN
    node("Div", [node("Sub", [inv, const("lo", lo)], "inv_lo"), const("span", hi - lo)], "disp")
    outputs = [helper.make_tensor_value_info("disp", F, [1, 1, H, W])]
elif kind == "canonical":
    d = depth("image")
    c = node("Mul", [d, const("k", CAN / FIN)], "canon4")
    node("Squeeze", [c, const("ax1", [1], np.int64)], "pred_depth")
    outputs = [helper.make_tensor_value_info("pred_depth", F, [1, H, W])]
elif kind == "multiscale":
    d = depth("image")
    p2 = node("AveragePool", [d], "p2", kernel_shape=[2, 2], strides=[2, 2])
    p4 = node("AveragePool", [d], "p4", kernel_shape=[4, 4], strides=[4, 4])
    node("Add", [p4, const("two", 2.0)], "depth_s4")
    node("Add", [p2, const("one", 1.0)], "depth_s2")
    node("Identity", [d], "depth_s1")
    outputs = [helper.make_tensor_value_info("depth_s4", F, [1, 1, H // 4, W // 4]),
               helper.make_tensor_value_info("depth_s2", F, [1, 1, H // 2, W // 2]),
               helper.make_tensor_value_info("depth_s1", F, [1, 1, H, W])]
elif kind == "uint8":
    inputs = [helper.make_tensor_value_info("input_1", TensorProto.UINT8, [1, H, W, 3])]
    x = node("Cast", ["input_1"], "xf", to=F)
    x = node("Div", [x, const("k255", 255.0)], "x01")
    x = node("Transpose", [x], "nchw", perm=[0, 3, 1, 2])
    d = depth(x)
    node("Transpose", [d], "Identity", perm=[0, 2, 3, 1])
    outputs = [helper.make_tensor_value_info("Identity", F, [1, H, W, 1])]
elif kind == "half":
    inputs = [helper.make_tensor_value_info("image", TensorProto.FLOAT16, [1, 3, H, W])]
    x = node("Cast", ["image"], "xf", to=F)
    d = depth(x)
    inv = node("Reciprocal", [d], "inv")
    node("Cast", [inv], "inv_depth", to=TensorProto.FLOAT16)
    outputs = [helper.make_tensor_value_info("inv_depth", TensorProto.FLOAT16, [1, 1, H, W])]
elif kind == "vit":
    inputs = [helper.make_tensor_value_info("pixel_values", F, [1, 3, "height", "width"])]
    shp = node("Shape", ["pixel_values"], "shp")
    hw = node("Slice", [shp, const("s2", [2], np.int64), const("s4", [4], np.int64)], "hw")
    n = node("Div", [hw, const("p14", [14, 14], np.int64)], "n_patches")
    h_n = node("Slice", [n, const("z0", [0], np.int64), const("z1", [1], np.int64)], "h_n")
    w_n = node("Slice", [n, const("o1", [1], np.int64), const("o2", [2], np.int64)], "w_n")
    fourteen = const("c14", [14], np.int64)
    ps = node("Concat", [const("b13", [1, 3], np.int64), h_n, fourteen, w_n, fourteen], "patch_shape", axis=0)
    patches = node("Reshape", ["pixel_values", ps], "patches")
    x = node("Reshape", [patches, shp], "unpatched")
    d = depth(x)
    rel = node("Add", [node("Mul", [node("Reciprocal", [d], "inv"), const("ka", A)], "inv_a"), const("kb", B)], "rel4")
    node("Squeeze", [rel, const("ax1", [1], np.int64)], "predicted_depth")
    outputs = [helper.make_tensor_value_info("predicted_depth", F, [1, "height", "width"])]
else:
    raise SystemExit("unknown convention " + kind)

g = helper.make_graph(nodes, kind, inputs, outputs, initializer=inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="python3-onnx test (" + kind + ")")
m.ir_version = 8
onnx.checker.check_model(m, full_check=True)
onnx.save(m, out_path)
`

// Constants of the convention models (ConventionDepth and the script).
const (
	ConvD0, ConvD1 = 2.0, 18.0 // d in [2, 20] m
	ConvNegDisp    = 0.3       // negdisp: disp = -0.3/d
	ConvStereo     = 5.4       // sigmoid: monodepth2's stereo factor
	ConvMinDepth   = 0.1       // sigmoid: min_depth
	ConvMaxDepth   = 100.0     // sigmoid: max_depth
	ConvCanonical  = 1000.0    // canonical: Metric3D's canonical focal
	// ConvFocalInput is the focal length (pixels at the model input) that
	// the canonical model's output assumes: a camera with this fx at the
	// input gets d back.
	ConvFocalInput = 50.0
)

// ConventionSpecs are the spec lines a user writes for each convention
// model (the input line, then the depth line), at the size Convention
// builds (ConventionSize).
var ConventionSpecs = map[string]string{
	"negdisp":    "input: {name: image, height: 32, width: 64}\ndepth: {name: disp, meaning: disparity, scale: -0.3}\n",
	"sigmoid":    "input: {name: image, height: 32, width: 64}\ndepth: {name: disp, meaning: sigmoid_disparity, min_depth: 0.1, max_depth: 100, scale: 5.4}\n",
	"canonical":  "input: {name: image, height: 32, width: 64}\ndepth: {name: pred_depth, meaning: metric_depth, canonical_focal: 1000}\n",
	"multiscale": "input: {name: image, height: 32, width: 64}\ndepth: {meaning: metric_depth}\n",
	"uint8":      "input: {name: input_1, layout: NHWC, height: 32, width: 64, pixel_range: 255}\ndepth: {name: Identity, meaning: metric_depth}\n",
	"half":       "input: {name: image, height: 32, width: 64}\ndepth: {name: inv_depth, meaning: inverse_depth}\n",
	"vit":        "input: {name: pixel_values, height: 28, width: 56, multiple: 14}\ndepth: {name: predicted_depth, meaning: relative}\n",
}

// Conventions lists the convention models in a fixed order.
var Conventions = []string{"negdisp", "sigmoid", "canonical", "multiscale", "uint8", "half", "vit"}

// ConventionSize is the input size of a convention model.
func ConventionSize(kind string) (w, h int) {
	if kind == "vit" {
		return 56, 28
	}
	return Width, Height
}

// ConventionDepth is the depth every convention model encodes for an RGB8
// pixel: ConvD0 + ConvD1 * mean(r, g, b)/255.
func ConventionDepth(r, g, b uint8) float64 {
	return ConvD0 + ConvD1*(float64(r)/255+float64(g)/255+float64(b)/255)/3
}

// Convention builds the convention model kind into dir with its spec
// beside it (ConventionSpecs) and returns both paths.
func Convention(tb testing.TB, kind, dir string) (model, spec string) {
	tb.Helper()
	text, ok := ConventionSpecs[kind]
	if !ok {
		tb.Fatalf("unknown convention %q", kind)
	}
	if _, err := os.Stat(Python); err != nil {
		tb.Fatalf("python3-onnx: %v (run scripts/deps.sh)", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	w, h := ConventionSize(kind)
	model = filepath.Join(dir, kind+".onnx")
	args := []string{"-c", conventionScript, kind, model, strconv.Itoa(h), strconv.Itoa(w)}
	for _, v := range []float64{ConvD0, ConvD1, ConvNegDisp, ConvStereo, ConvMinDepth, ConvMaxDepth, ConvCanonical, ConvFocalInput, MiDaSA, MiDaSB} {
		args = append(args, strconv.FormatFloat(v, 'g', -1, 64))
	}
	out, err := exec.Command(Python, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("build the %s model with python3-onnx: %v\n%s", kind, err, out)
	}
	spec = filepath.Join(dir, kind+".yaml")
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
	return model, spec
}
