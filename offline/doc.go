// Package offline holds the training applications built on the method
// (package auxue) and the reference depth network (offline/depthnet): the
// reference depth training on the simulated world, the AuxUE training on a
// frozen depth model run through ONNX Runtime, the quick evaluation of the
// models in models/ (eval-quick), the models/MANIFEST tools and the 1D toy
// reproduction of the paper's supplementary A.1.
//
// Offline applications may import anything; nothing in the streaming path
// (runtime, camera, alerts) imports them.
package offline
