// Package intrinsics holds a camera's pinhole intrinsics (fx, fy, cx, cy
// in pixels of frames of a known size), the rule that scales them with the
// frame, and the readers of the calibration files cameras come with: a
// KITTI calibration (the P2 / P_rect_02 projection of the left colour
// camera) and a ROS CameraInfo YAML (its K matrix).
//
// Scaling (pixel centres at integer coordinates): intrinsics of frames
// W_calib x H_calib, used on frames W x H, become
//
//	sx = W / W_calib,  sy = H / H_calib
//	fx' = fx sx,  fy' = fy sy,  cx' = (cx + 0.5) sx - 0.5,  cy' = (cy + 0.5) sy - 0.5
//
// so that a crop-free resize maps every ray to the same pixel position.
// Intrinsics without a size are taken to be of the frames they meet.
package intrinsics
