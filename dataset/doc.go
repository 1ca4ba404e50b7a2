// Package dataset reads and writes depth data sets: the simulator's
// KITTI-layout data sets (RGB, projected sparse ground truth, dense depth,
// semantics, split files and meta.json), real KITTI (raw image_02 frames
// with the annotated proj_depth ground truth, selected by Eigen-style split
// files) and an NYU-style indoor layout (rgb/ and depth/ PNG pairs).
//
// Depth maps on disk are 16-bit grayscale PNGs holding metres x scale
// (KITTI's scale is 256) with 0 meaning "no ground truth". Every reader
// rejects malformed or truncated files with an error that names the file.
//
// The package knows nothing of cameras: the simulator plugs into Generate
// through the FrameSource interface.
package dataset
