// Package onnx writes, reads and edits ONNX model files without generated
// protobuf code: a small hand-written encoder and decoder on
// google.golang.org/protobuf/encoding/protowire cover the messages the project
// needs (ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto,
// ValueInfoProto, TypeProto.Tensor, OperatorSetIdProto). Fields it does not
// model are kept as raw bytes and written back unchanged, so a decode-edit-
// encode round trip preserves them.
//
// Why not code generated from onnx.proto with protoc-gen-go: onnx.proto is
// proto2 and declares AttributeProto's repeated scalars (floats = 7, ints = 8)
// without [packed = true], so generated code writes them one tag per element,
// while this encoder writes them packed (which every reader accepts: proto
// parsers take both forms). Every model file the project writes with
// such attributes (models/, whose sha256 models/MANIFEST records) would
// change bytes, so the condition for generating the codec (the
// written bytes identical) does not hold.
//
// On top of the codec it exports pkg/nn networks to ONNX (opset 17,
// ir_version 8, the newest that Debian's python3-onnx 1.12 checks; the AuxUE's
// export is auxue/onnxexport), defines TinyUNet (a small encoder-decoder depth
// net for parity tests and benchmarks), summarises a model for
// `didoedge model inspect`, and exposes an intermediate tensor as an extra
// graph output for `didoedge model expose`.
package onnx
