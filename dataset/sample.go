package dataset

// Intrinsics are pinhole intrinsics in pixels (pixel centres at integer
// coordinates).
type Intrinsics struct {
	Fx float64 `json:"fx"`
	Fy float64 `json:"fy"`
	Cx float64 `json:"cx"`
	Cy float64 `json:"cy"`
}

// Sample is one frame of a data set. Maps are row-major.
type Sample struct {
	// Drive is the sequence the frame belongs to (a KITTI drive, an NYU
	// scene or a simulated drive); Frame its index there.
	Drive string
	Frame int
	// Name identifies the frame in error messages and reports.
	Name          string
	Width, Height int
	// RGB is H*W*3 bytes, interleaved.
	RGB []uint8
	// Sparse is the ground truth depth in metres, 0 = none.
	Sparse []float32
	// Dense is dense depth in metres (0 = none); nil when the data set has
	// no dense depth.
	Dense []float32
	// Semantic holds class ids; nil when the data set has none.
	Semantic   []uint8
	Intrinsics Intrinsics
}

// Pixels returns the frame's interleaved RGB and its size (the frame as
// runtime/infer's InferFrames reads it).
func (s *Sample) Pixels() (rgb []uint8, width, height int) { return s.RGB, s.Width, s.Height }

// FocalX is the frame's fx in pixels (0: unknown).
func (s *Sample) FocalX() float64 { return s.Intrinsics.Fx }

// Item names one frame of a split list.
type Item struct {
	Drive string
	Frame int
	// Side is 'l' (image_02) or 'r' (image_03) for KITTI lists; 'l' otherwise.
	Side byte
	// RGBPath and DepthPath are set by lists that spell out relative paths
	// (the BTS / AdaBins Eigen files); DepthPath is empty for "None".
	RGBPath, DepthPath string
	// Focal is the focal length column of BTS-style lists (0 if absent).
	Focal float64
}
