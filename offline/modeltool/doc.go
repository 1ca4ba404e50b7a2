// Package smoke runs the depth network and the AuxUE on deterministic
// synthetic frames and compares two such runs map by map. It is the engine of
// the cross-architecture smoke test (offline/modeltool-qemu.sh): the same models and
// the same frames run on amd64 and, under qemu-user, on arm64 with the arm64
// ONNX Runtime library, and the depth, Laplace scale and epistemic maps must
// agree within a tolerance.
//
// Without trained reference models it exports two test networks from code
// with seeded random weights (ExportTestModels): a TinyUNet depth net and a
// dense generalized AuxUE. They exercise the same operators and data path as
// real models; their outputs mean nothing.
//
// A run directory holds one raw float32 little-endian file per frame and map
// (frame000_depth.f32, ...) and summary.json describing them.
package modeltool
