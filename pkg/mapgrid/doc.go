// Package mapgrid is the geometry between a camera frame and a model's
// grids: how a frame of any size sits in a model input (Fit: stretched or
// letterboxed into a content rectangle) and the bilinear resampling of a
// map computed on the input grid, at any resolution, back to the frame
// (Remap).
//
// It is a leaf: inference resamples the model outputs with it, and the
// readers of recordings rebuild frame-size maps from maps recorded at the
// resolution they were computed at, with exactly the same arithmetic.
package mapgrid
