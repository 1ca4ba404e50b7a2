package infer

import "github.com/didoedge/didoedge/pkg/mapgrid"

// Geometry places a camera frame in a model input (mapgrid.Geometry).
type Geometry = mapgrid.Geometry

// Remap resamples maps on the input grid to the frame (mapgrid.Remap).
type Remap = mapgrid.Remap

// Fit returns the geometry of a frame of frameW x frameH in an input of
// inW x inH for the resize mode (ResizeStretch or ResizeLetterbox).
func Fit(frameW, frameH, inW, inH int, mode string) Geometry {
	return mapgrid.Fit(frameW, frameH, inW, inH, mode)
}

// NewRemap prepares the resampling of a mapW x mapH map over g's input to
// g's frame.
func NewRemap(g Geometry, mapW, mapH int) *Remap { return mapgrid.NewRemap(g, mapW, mapH) }
