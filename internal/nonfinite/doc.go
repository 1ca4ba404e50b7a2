// Package nonfinite counts NaN and ±Inf in float32 slices fast: every
// model output of every frame is scanned before it is used (a frame
// with a non-finite value is refused), on the frame's path.
package nonfinite
