// Package onnx writes, reads and edits ONNX model files without generated
// protobuf code: a small hand-written encoder and decoder on
// google.golang.org/protobuf/encoding/protowire cover the messages the project
// needs (ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto,
// ValueInfoProto, TypeProto.Tensor, OperatorSetIdProto). Fields it does not
// model are kept as raw bytes and written back unchanged, so a decode-edit-
// encode round trip preserves them.
//
// On top of the codec it exports pkg/nn networks and the generalized AuxUE
// to ONNX (opset 17, ir_version 8, the newest that Debian's python3-onnx 1.12
// checks), defines TinyUNet (a small encoder-decoder depth net for parity
// tests and benchmarks), summarises a model for `didoedge model inspect`, and
// exposes an intermediate tensor as an extra graph output for
// `didoedge model expose`.
package onnx
