// Package metrics evaluates depth predictions and their uncertainty maps:
// depth quality (Eigen et al. 2014 / KITTI), sparsification curves with AUSE
// and AURG (Poggi et al. 2020), AUC and AUPR for out-of-distribution
// detection, Sky-All (the DIDO paper's sky metric) and the uncertainty
// calibration error UCE.
//
// Every function works on plain []float32 maps (row-major, one value per
// pixel) and keeps its scratch buffers in a reusable value, so evaluating a
// stream of frames allocates nothing once the buffers have grown. Pixels
// with ground truth are those with gt > 0 (the KITTI / simulator encoding of
// "no ground truth" is 0); non-finite values are never counted.
package metrics
