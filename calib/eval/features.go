package eval

import "github.com/didoedge/didoedge/auxue/depthnet"

// The AuxUE of the protocol works at half resolution on the inputs and
// targets the exported runtime AuxUE uses (auxue/depthnet, factor 2).

// auxFeatures writes the 2x2 block means of the normalized image (3,H,W) and
// of depth/maxDepth (H,W) into dst (4,H/2,W/2).
func auxFeatures(img, depth []float32, height, width int, dst []float32) {
	depthnet.AuxFeatures(img, depth, height, width, 2, maxDepth, dst)
}

// halfResErrors turns |depth - gt| on ground-truth pixels (gt > 0) into
// half-resolution targets: a 2x2 block is valid when any of its pixels has
// ground truth, and its error is the mean over those pixels.
func halfResErrors(depth, gt []float32, height, width int, errs []float32, valid []bool) {
	depthnet.HalfResErrors(depth, gt, height, width, errs, valid)
}
