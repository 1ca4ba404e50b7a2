# Builds the foreign depth models of internal/testmodels (foreign.go says what each is)
# with Debian's python3-onnx around a reference depth.onnx:
#   /usr/bin/python3 internal/testmodels/foreign.py KIND REFERENCE OUT A B
# (KIND midas, negdisp or nhwc; A and B the output's affine map, e.g. midas 37.5 -0.2).
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
