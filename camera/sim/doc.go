// Package sim renders a procedural world for depth experiments: an outdoor
// road scene (KITTI-like camera and a 64-beam LiDAR) and an indoor scene of
// furnished rooms (a Kinect-like depth sensor).
//
// Every frame carries an RGB image, dense metric depth, LiDAR-like sparse
// ground truth that never covers the sky, and semantic labels. Rendering is
// an analytic ray cast: the camera has no pitch or roll, so every image
// column is a vertical plane of the world and the scene's axis-aligned boxes,
// vertical cylinders and spheres are culled once per column. Frame i is a
// pure function of (Config, i), so a streaming server, a data-set writer and
// tests agree on every byte.
//
// Coordinates: world x to the right, y up (ground at y = 0), z forward along
// the road. The camera looks along +z. Pixel (u, v) denotes the centre of the
// pixel in column u and row v (OpenCV convention), so the ray through it has
// direction ((u-cx)/fx, -(v-cy)/fy, 1) in world axes and the ray parameter is
// the depth along the optical axis.
package sim
