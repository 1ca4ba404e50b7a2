package mapgrid

import (
	"fmt"
	"math"
)

// Resize modes of Fit: how a frame goes into a model input of another
// aspect ratio.
const (
	// Stretch scales the frame to the whole input (aspect ratio not kept).
	Stretch = "stretch"
	// Letterbox scales the frame into the largest centred rectangle of its
	// aspect ratio; the rest of the input is black.
	Letterbox = "letterbox"
)

// Geometry places a camera frame of FrameW x FrameH in a model input of
// InW x InH: the frame is scaled into the content rectangle (X0, Y0, CW,
// CH) of the input, the whole input when stretched, the largest centred
// rectangle of the frame's aspect ratio when letterboxed (the rest is
// black). Maps on the input grid come back to the frame through the same
// rectangle.
type Geometry struct {
	FrameW, FrameH int
	InW, InH       int
	X0, Y0, CW, CH int
}

// Fit returns the geometry of a frame in an input for the resize mode
// (Stretch or Letterbox).
func Fit(frameW, frameH, inW, inH int, mode string) Geometry {
	g := Geometry{FrameW: frameW, FrameH: frameH, InW: inW, InH: inH, CW: inW, CH: inH}
	if mode != Letterbox || frameW*inH == frameH*inW {
		return g
	}
	s := math.Min(float64(inW)/float64(frameW), float64(inH)/float64(frameH))
	g.CW = min(inW, max(1, int(math.Round(float64(frameW)*s))))
	g.CH = min(inH, max(1, int(math.Round(float64(frameH)*s))))
	g.X0, g.Y0 = (inW-g.CW)/2, (inH-g.CH)/2
	return g
}

// Identity reports whether the frame is the input, pixel for pixel.
func (g Geometry) Identity() bool {
	return g.FrameW == g.InW && g.FrameH == g.InH && g.CW == g.InW && g.CH == g.InH
}

// ToInput maps a frame position (pixel centres at integers) to the input
// grid: u = X0 + (x + 0.5) CW/FrameW - 0.5.
func (g Geometry) ToInput(x, y float64) (u, v float64) {
	return float64(g.X0) + (x+0.5)*float64(g.CW)/float64(g.FrameW) - 0.5,
		float64(g.Y0) + (y+0.5)*float64(g.CH)/float64(g.FrameH) - 0.5
}

// InputPixel is the input pixel holding frame pixel (x, y), or -1 when it
// falls outside the input.
func (g Geometry) InputPixel(x, y int) int {
	u, v := g.ToInput(float64(x), float64(y))
	iu, iv := int(math.Floor(u+0.5)), int(math.Floor(v+0.5))
	if iu < 0 || iv < 0 || iu >= g.InW || iv >= g.InH {
		return -1
	}
	return iv*g.InW + iu
}

// Remap resamples maps that cover the model input grid (at any resolution
// MapW x MapH) to the frame, bilinearly with pixel centres aligned and
// positions clamped to the map. The taps are computed once; Apply
// allocates nothing.
type Remap struct {
	g          Geometry
	mapW, mapH int
	x0, x1     []int32
	wx         []float32
	y0, y1     []int32
	wy         []float32
}

// NewRemap prepares the resampling of a MapW x MapH map over g's input to
// g's frame.
func NewRemap(g Geometry, mapW, mapH int) *Remap {
	r := &Remap{g: g, mapW: mapW, mapH: mapH,
		x0: make([]int32, g.FrameW), x1: make([]int32, g.FrameW), wx: make([]float32, g.FrameW),
		y0: make([]int32, g.FrameH), y1: make([]int32, g.FrameH), wy: make([]float32, g.FrameH)}
	for x := range g.FrameW {
		u, _ := g.ToInput(float64(x), 0)
		r.x0[x], r.x1[x], r.wx[x] = tap((u+0.5)*float64(mapW)/float64(g.InW)-0.5, mapW)
	}
	for y := range g.FrameH {
		_, v := g.ToInput(0, float64(y))
		r.y0[y], r.y1[y], r.wy[y] = tap((v+0.5)*float64(mapH)/float64(g.InH)-0.5, mapH)
	}
	return r
}

// tap clamps position s to [0, n-1] and returns the two neighbours and the
// weight of the second.
func tap(s float64, n int) (int32, int32, float32) {
	s = math.Max(0, math.Min(s, float64(n-1)))
	a := int(s)
	b := min(a+1, n-1)
	return int32(a), int32(b), float32(s - float64(a))
}

// Identity reports whether Apply would copy the map unchanged.
func (r *Remap) Identity() bool {
	return r.g.Identity() && r.mapW == r.g.InW && r.mapH == r.g.InH
}

// Apply writes the frame-size map of src (MapW x MapH) into dst
// (FrameW x FrameH).
func (r *Remap) Apply(src, dst []float32) error {
	if len(src) != r.mapW*r.mapH || len(dst) != r.g.FrameW*r.g.FrameH {
		return fmt.Errorf("remap: %d source and %d destination values for %dx%d -> %dx%d", len(src), len(dst), r.mapW, r.mapH, r.g.FrameW, r.g.FrameH)
	}
	if r.Identity() {
		copy(dst, src)
		return nil
	}
	W := r.g.FrameW
	for y := range r.g.FrameH {
		row0, row1 := src[int(r.y0[y])*r.mapW:], src[int(r.y1[y])*r.mapW:]
		fy := r.wy[y]
		out := dst[y*W : (y+1)*W]
		for x := range out {
			a, b, fx := r.x0[x], r.x1[x], r.wx[x]
			top := row0[a] + fx*(row0[b]-row0[a])
			bot := row1[a] + fx*(row1[b]-row1[a])
			out[x] = top + fy*(bot-top)
		}
	}
	return nil
}
