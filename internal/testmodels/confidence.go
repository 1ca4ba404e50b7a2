package testmodels

import (
	_ "embed"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// Confidence outputs of published depth networks, as tiny models built by
// Debian's python3-onnx. Each computes the depth of ConventionDepth
// (output "depth", metres, (1,1,H,W)) and, from the green channel
// g = G/255 of its image, a confidence map in its convention, so that a
// test knows every value (ConfidenceWant gives the read-out u in float64):
//
//	unidepth   UniDepthV2: "confidence" (1,1,H,W) = exp(e), e = ln(1 + g/2) the log error
//	logerr     a raw log-error export: "log_error" (1,1,H,W) = e = g/2
//	metric3d   Metric3D v2: "confidence" (1,1,H,W) = 1 - g/2, trained toward 1 - |d-y|/y
//	da3        Depth Anything 3: "conf" (1,H,W) = expp1(x) = exp(x) + 1, x = 4 - 8 g
//	marigold   a Marigold-like ensemble of four members d (1 + s_i g),
//	           s = -0.3, -0.1, 0.1, 0.3: "uncertainty" (1,H,W) = their standard
//	           deviation (unbiased, as torch.std), in metres
//	moge       MoGe: "mask" (1,H,W) = sigmoid(6 - 12 g), valid above 0.5
//	coarse     a confidence at half the depth's resolution: "conf" (1,1,H/2,W/2)
//	           (a wrong shape that the spec check must refuse, naming confidence)
const confidenceScript = `
import sys, onnx
from onnx import helper, TensorProto, numpy_helper
import numpy as np

kind, out_path, H, W = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
D0, D1 = float(sys.argv[5]), float(sys.argv[6])
F = TensorProto.FLOAT
nodes, inits = [], []
def const(name, v, dt=np.float32):
    inits.append(numpy_helper.from_array(np.array(v, dt), name))
    return name
def node(op, ins, out, **kw):
    nodes.append(helper.make_node(op, ins, [out], **kw))
    return out

m = node("ReduceMean", ["image"], "m", axes=[1], keepdims=1)
d = node("Add", [node("Mul", [m, const("d1", D1)], "m_d1"), const("d0", D0)], "depth")
g = node("Slice", ["image", const("g0", [1], np.int64), const("g1", [2], np.int64), const("gax", [1], np.int64)], "g")
half = node("Mul", [g, const("half", 0.5)], "g_half")
ax1 = const("ax1", [1], np.int64)
if kind == "unidepth":
    e = node("Log", [node("Add", [half, const("one", 1.0)], "one_plus")], "e")
    node("Exp", [e], "confidence")
    conf = helper.make_tensor_value_info("confidence", F, [1, 1, H, W])
elif kind == "logerr":
    node("Identity", [half], "log_error")
    conf = helper.make_tensor_value_info("log_error", F, [1, 1, H, W])
elif kind == "metric3d":
    node("Sub", [const("one", 1.0), half], "confidence")
    conf = helper.make_tensor_value_info("confidence", F, [1, 1, H, W])
elif kind == "da3":
    x = node("Sub", [const("four", 4.0), node("Mul", [g, const("eight", 8.0)], "g8")], "x")
    c4 = node("Add", [node("Exp", [x], "ex"), const("one", 1.0)], "conf4")
    node("Squeeze", [c4, ax1], "conf")
    conf = helper.make_tensor_value_info("conf", F, [1, H, W])
elif kind == "marigold":
    members = []
    for i, s in enumerate([-0.3, -0.1, 0.1, 0.3]):
        f = node("Add", [node("Mul", [g, const("s%d" % i, s)], "gs%d" % i), const("one%d" % i, 1.0)], "f%d" % i)
        members.append(node("Mul", [d, f], "member%d" % i))
    ens = node("Concat", members, "ensemble", axis=1)
    mean = node("ReduceMean", [ens], "ens_mean", axes=[1], keepdims=1)
    dev = node("Sub", [ens, mean], "ens_dev")
    ss = node("ReduceSum", [node("Mul", [dev, dev], "ens_sq"), ax1], "ens_ss", keepdims=1)
    sd = node("Sqrt", [node("Div", [ss, const("nm1", 3.0)], "ens_var")], "ens_std")
    node("Squeeze", [sd, ax1], "uncertainty")
    conf = helper.make_tensor_value_info("uncertainty", F, [1, H, W])
elif kind == "moge":
    logit = node("Sub", [const("six", 6.0), node("Mul", [g, const("twelve", 12.0)], "g12")], "logit")
    node("Squeeze", [node("Sigmoid", [logit], "mask4"), ax1], "mask")
    conf = helper.make_tensor_value_info("mask", F, [1, H, W])
elif kind == "coarse":
    node("AveragePool", [half], "conf", kernel_shape=[2, 2], strides=[2, 2])
    conf = helper.make_tensor_value_info("conf", F, [1, 1, H // 2, W // 2])
else:
    raise SystemExit("unknown confidence convention " + kind)

inputs = [helper.make_tensor_value_info("image", F, [1, 3, H, W])]
outputs = [helper.make_tensor_value_info("depth", F, [1, 1, H, W]), conf]
gr = helper.make_graph(nodes, kind, inputs, outputs, initializer=inits)
mo = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17)], producer_name="python3-onnx test (confidence " + kind + ")")
mo.ir_version = 8
onnx.checker.check_model(mo, full_check=True)
onnx.save(mo, out_path)
`

// ConfidenceKinds lists the confidence conventions ConfidenceModel builds
// that a spec accepts (coarse, the wrong shape, is not among them).
var ConfidenceKinds = []string{"unidepth", "logerr", "metric3d", "da3", "marigold", "moge"}

// ConfidenceSpecs are the spec lines of each confidence model at
// Width x Height: the input, the depth and the confidence line.
var ConfidenceSpecs = map[string]string{
	"unidepth": "confidence: {name: confidence, meaning: log_error, activation: exp}\n",
	"logerr":   "confidence: {name: log_error, meaning: log_error}\n",
	"metric3d": "confidence: {name: confidence, meaning: relative_error_complement}\n",
	"da3":      "confidence: {name: conf, meaning: ranking}\n",
	"marigold": "confidence: {name: uncertainty, meaning: spread}\n",
	"moge":     "confidence: {name: mask, meaning: validity}\n",
	"coarse":   "confidence: {name: conf, meaning: log_error}\n",
}

// ConfidenceSpecText is the whole spec of a confidence model.
func ConfidenceSpecText(kind string) string {
	return "input: {name: image, height: " + strconv.Itoa(Height) + ", width: " + strconv.Itoa(Width) + "}\n" +
		"depth: {name: depth, meaning: metric_depth}\n" + ConfidenceSpecs[kind]
}

// ConfidenceWant is the read-out u (larger = less trustworthy) that the
// spec's closed form gives for a pixel with green value g8 (0..255) of a
// confidence model, computed in float64 from the model's definition.
func ConfidenceWant(kind string, r, g8, b uint8) float64 {
	g := float64(g8) / 255
	switch kind {
	case "unidepth":
		return math.Exp(math.Log1p(g/2)) - 1 // u = v - 1, v = exp(e)
	case "logerr":
		return math.Expm1(g / 2) // u = exp(e) - 1
	case "metric3d":
		return 1 - (1 - g/2) // u = 1 - c
	case "da3":
		return 1 / (math.Exp(4-8*g) + 1) // u = 1 / conf
	case "marigold":
		d := ConventionDepth(r, g8, b)
		s := []float64{-0.3, -0.1, 0.1, 0.3}
		mean := 0.0
		for _, si := range s {
			mean += d * (1 + si*g)
		}
		mean /= 4
		ss := 0.0
		for _, si := range s {
			x := d*(1+si*g) - mean
			ss += x * x
		}
		return math.Sqrt(ss / 3)
	case "moge":
		return 1 - 1/(1+math.Exp(-(6-12*g))) // u = 1 - p
	}
	return math.NaN()
}

// ConfidenceModel builds the confidence model kind into dir with its spec
// beside it and returns both paths.
func ConfidenceModel(tb testing.TB, kind, dir string) (model, spec string) {
	tb.Helper()
	if _, ok := ConfidenceSpecs[kind]; !ok {
		tb.Fatalf("unknown confidence convention %q", kind)
	}
	if _, err := os.Stat(Python); err != nil {
		tb.Fatalf("python3-onnx: %v (run scripts/deps.sh)", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	model = filepath.Join(dir, "conf_"+kind+".onnx")
	out, err := exec.Command(Python, "-c", confidenceScript, kind, model, strconv.Itoa(Height), strconv.Itoa(Width),
		strconv.FormatFloat(ConvD0, 'g', -1, 64), strconv.FormatFloat(ConvD1, 'g', -1, 64)).CombinedOutput()
	if err != nil {
		tb.Fatalf("build the %s confidence model with python3-onnx: %v\n%s", kind, err, out)
	}
	spec = filepath.Join(dir, "conf_"+kind+".yaml")
	if err := os.WriteFile(spec, []byte(ConfidenceSpecText(kind)), 0o644); err != nil {
		tb.Fatal(err)
	}
	return model, spec
}

// confidenceHeadScript adds a confidence output to an existing depth model
// (confidence_head.py, also run by hand: docs/models.md).
//
//go:embed confidence_head.py
var confidenceHeadScript string

// ConfidenceHeadSpecs are the spec lines of the outputs AddConfidenceHead
// adds, per kind.
var ConfidenceHeadSpecs = map[string]string{
	"da3":      "{name: conf, meaning: ranking}",
	"metric3d": "{name: confidence, meaning: relative_error_complement}",
	"unidepth": "{name: confidence, meaning: log_error, activation: exp}",
}

// AddConfidenceHead writes dst: the depth model src (depth output "depth",
// (1,1,H,W)) with a confidence output of kind computed from its depth
// (confidence_head.py), and returns the spec's confidence line.
func AddConfidenceHead(tb testing.TB, src, dst, kind string) string {
	tb.Helper()
	line, ok := ConfidenceHeadSpecs[kind]
	if !ok {
		tb.Fatalf("unknown confidence head %q", kind)
	}
	out, err := exec.Command(Python, "-c", confidenceHeadScript, src, dst, kind).CombinedOutput()
	if err != nil {
		tb.Fatalf("add a %s confidence head to %s with python3-onnx: %v\n%s", kind, src, err, out)
	}
	return line
}
