// Package corrupt implements the 18 image corruptions of the ImageNet-C
// family (Hendrycks & Dietterich 2019, as packaged by `imagecorruptions`,
// plus iso_noise, dark and color_quant from 3D Common Corruptions) used to
// build KITTI-C style robustness sets, with severities 1..5.
//
// Every corruption works on interleaved 8-bit RGB (H*W*3 bytes) of any size,
// is deterministic for a given seed, and keeps the image size. A Corruptor
// owns scratch buffers so that applying corruptions frame after frame does
// not allocate (jpeg_compression excepted: image/jpeg allocates internally).
//
// CorruptDataset applies the corruptions to a KITTI-like data set directory
// (RGB frames under image_02/data/) and copies every other file unchanged.
//
// Parameters per severity and the deviations from the Python reference are
// listed in docs/corruptions.md.
package corrupt
