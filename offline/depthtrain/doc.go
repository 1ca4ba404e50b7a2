// Package depthtrain trains the reference depth network (offline/depthnet)
// on the simulated world: the frame pool rendered on the fly (SimSource,
// through simworld.World), the image normalization and crops, the
// scale-invariant log loss (SILog) and the training loop (Train). The
// AuxUE trainer (offline) and the paper's protocol (offline/protocol)
// draw from the same pool.
package depthtrain
