// Package colormap is the colour scale of the epistemic heat maps that a
// person sees live (the debug page) and in event snapshots: one scale, so
// that a colour means the same K/S on both.
package colormap
