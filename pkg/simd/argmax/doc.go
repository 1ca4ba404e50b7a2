// Package vmax keeps a running argmax over rows of float32 values, eight
// elements per instruction: the DIDO read-out's class of each pixel is
// the first class whose logit is the largest, updated class by class.
package argmax
