package sim

// Frame is one rendered frame. All maps are row-major with Width*Height
// entries (RGB has three interleaved bytes per pixel).
type Frame struct {
	Index         int
	Width, Height int
	// RGB is the sRGB image, H*W*3 bytes, interleaved R, G, B.
	RGB []uint8
	// Depth is dense metric depth in metres along the optical axis (z).
	// Pixels that see the sky hold 0 (never +Inf), the same convention as
	// the on-disk depth PNGs.
	Depth []float32
	// Sparse is the sensor ground truth in metres along the optical axis,
	// 0 = no return: the projected 64-beam LiDAR outdoors, a Kinect-like
	// structured-light map indoors. Never set on sky pixels.
	Sparse []float32
	// Semantic holds class ids: Cityscapes ids outdoors, NYU-40 ids indoors
	// (see the Class constants).
	Semantic []uint8
}

// NewFrame allocates a frame for the given size. Non-positive sizes give an
// empty frame that Render rejects.
func NewFrame(width, height int) *Frame {
	if width <= 0 || height <= 0 {
		return &Frame{Width: width, Height: height}
	}
	n := width * height
	return &Frame{
		Width:    width,
		Height:   height,
		RGB:      make([]uint8, 3*n),
		Depth:    make([]float32, n),
		Sparse:   make([]float32, n),
		Semantic: make([]uint8, n),
	}
}
