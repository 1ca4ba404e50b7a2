// Package testmodels writes the seeded, random-weight ONNX models that
// tests across the module run the pipeline with: a TinyUNet depth network
// (image -> depth, features) and a dense AuxUE reading image + depth
// (4 channels), both at 32x64. Their outputs are meaningless, but their
// names, shapes and wiring are those of real models, and a frame runs in
// milliseconds on ONNX Runtime's CPU provider.
//
// It imports package testing: only tests may import it, so that it never
// ends up in a production binary.
package testmodels
