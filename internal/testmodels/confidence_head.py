# Adds a confidence output to a depth model, in the convention of a published
# network, with Debian's python3-onnx: a foreign model whose confidence the
# runtime reads through its io spec's confidence line (docs/models.md).
#
#   /usr/bin/python3 internal/testmodels/confidence_head.py IN.onnx OUT.onnx KIND [DEPTH_OUTPUT]
#
# The confidence is computed from the model's own depth output d (1,1,H,W):
# g = |d/dx ln d| + |d/dy ln d| (forward differences, 0 on the last column and
# row; any H x W), the strength of depth edges, where monocular depth errs most. KIND:
#
#   da3       "conf" = expp1(3 - 30 g) = exp(3 - 30 g) + 1     (ranking)
#   metric3d  "confidence" = 1 - min(5 g, 1)                  (relative_error_complement)
#   unidepth  "confidence" = exp(min(2 g, 8))                 (log_error, activation exp)
#
# The depth output and everything else stay as they are.
import sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

src, dst, kind = sys.argv[1], sys.argv[2], sys.argv[3]
depth = sys.argv[4] if len(sys.argv) > 4 else "depth"
m = onnx.load(src)
g = m.graph
if not any(o.name == depth for o in g.output):
    raise SystemExit("no output %r in %s (outputs: %s)" % (depth, src, [o.name for o in g.output]))
dout = next(o for o in g.output if o.name == depth)
if len(dout.type.tensor_type.shape.dim) not in (0, 4):
    raise SystemExit("depth output %r has rank %d, want (1,1,H,W)" % (depth, len(dout.type.tensor_type.shape.dim)))
p = "confhead_"
def const(name, v, dt=np.float32):
    g.initializer.append(numpy_helper.from_array(np.array(v, dt), p + name))
    return p + name
def node(op, ins, out, **kw):
    g.node.append(helper.make_node(op, ins, [p + out], **kw))
    return p + out

l = node("Log", [node("Max", [depth, const("eps", 1e-3)], "dpos")], "logd")
def diff(axis, name):
    # l[i+1] - l[i] along axis, then a zero appended: any H x W.
    ax = const("ax" + name, [axis], np.int64)
    hi = node("Slice", [l, const("one" + name, [1], np.int64), const("big" + name, [2**62], np.int64), ax], "hi" + name)
    lo = node("Slice", [l, const("zero" + name, [0], np.int64), const("m1" + name, [-1], np.int64), ax], "lo" + name)
    pads = [0, 0, 0, 0, 0, 0, 0, 0]
    pads[4 + axis] = 1
    d = node("Pad", [node("Sub", [hi, lo], "d" + name), const("pads" + name, pads, np.int64)], "pd" + name, mode="constant")
    return node("Abs", [d], "a" + name)
edge = node("Add", [diff(3, "x"), diff(2, "y")], "edge")
if kind == "da3":
    x = node("Sub", [const("three", 3.0), node("Mul", [edge, const("thirty", 30.0)], "e30")], "x")
    out = "conf"
    g.node.append(helper.make_node("Add", [node("Exp", [x], "ex"), const("one", 1.0)], [out]))
elif kind == "metric3d":
    out = "confidence"
    g.node.append(helper.make_node("Sub", [const("one", 1.0), node("Min", [node("Mul", [edge, const("five", 5.0)], "e5"), const("cap", 1.0)], "e5c")], [out]))
elif kind == "unidepth":
    out = "confidence"
    g.node.append(helper.make_node("Exp", [node("Min", [node("Mul", [edge, const("two", 2.0)], "e2"), const("eight", 8.0)], "e2c")], [out]))
else:
    raise SystemExit("unknown kind %r: da3, metric3d or unidepth" % kind)
vi = helper.make_tensor_value_info(out, TensorProto.FLOAT, None)
vi.type.tensor_type.shape.CopyFrom(dout.type.tensor_type.shape)  # the depth's own shape
g.output.append(vi)
m.producer_name = (m.producer_name + " + python3-onnx confidence head (" + kind + ")").strip()
onnx.checker.check_model(m, full_check=True)
onnx.save(m, dst)
print(out)
