// Package simworld plugs the simulated camera (camera/sim) into the data
// sets as a frame source (dataset.FrameSource): World renders drives of
// a world for `didoedge sim render` (RenderFlags), the demo's calibration
// frames and the training pools, so that dataset itself knows no camera.
// Drive d of a set with seed S is the world of seed dataset.DriveSeed(S, d),
// so a frame is a pure function of (S, d, index).
package simworld
