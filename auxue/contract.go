package auxue

import (
	"fmt"
	"math"
)

// ImageNet statistics: the AuxUE's own normalization of the image channels,
// u_k = (p_k/255 - ImageMean[k]) / ImageStd[k] for RGB channel k, whatever
// the main model's normalization.
var (
	ImageMean = [3]float32{0.485, 0.456, 0.406}
	ImageStd  = [3]float32{0.229, 0.224, 0.225}
)

// ImageSource says how the main model holds the image it receives, so that
// the AuxUE can read that tensor as is: the layout, and per canonical RGB
// channel k the input channel Src[k] holding it and the affine map
// u_k = Gain[k]*v + Offset[k] from that channel's value v to the AuxUE's
// ImageNet normalization. The identity (Src 0,1,2, Gain 1, Offset 0) is a
// main model normalized like the AuxUE (the reference depth network).
type ImageSource struct {
	NHWC     bool
	Channels int // 3, or 1 for a grey input (Src all 0)
	Src      [3]int
	Gain     [3]float32
	Offset   [3]float32
}

// IdentityImage is an NCHW RGB input with ImageNet normalization.
func IdentityImage() ImageSource {
	return ImageSource{Channels: 3, Src: [3]int{0, 1, 2}, Gain: [3]float32{1, 1, 1}}
}

// ImageFromPixels derives the source of a main model whose input value at
// channel c is x_c = p[order[c]]*gain[c] + offset[c] for the 8-bit RGB
// pixel p (order: which RGB channel input channel c holds; channels 1 for
// grey, whose value is the luma). Inverting x for p and normalizing p
// gives u_k = x/(gain*255*std_k) + (-offset/(gain*255) - mean_k)/std_k.
func ImageFromPixels(nhwc bool, channels int, order [3]int, gain, offset [3]float32) (ImageSource, error) {
	s := ImageSource{NHWC: nhwc, Channels: channels}
	if channels != 3 && channels != 1 {
		return s, fmt.Errorf("auxue image source: %d channels, want 3 or 1", channels)
	}
	for k := 0; k < 3; k++ {
		c := 0
		if channels == 3 {
			c = -1
			for i, o := range order {
				if o == k {
					c = i
				}
			}
			if c < 0 {
				return s, fmt.Errorf("auxue image source: channel order %v does not hold RGB channel %d", order, k)
			}
		}
		g := float64(gain[c])
		if !(g > 0) || math.IsInf(g, 0) {
			return s, fmt.Errorf("auxue image source: gain %v of channel %d must be positive and finite", g, c)
		}
		std, mean := float64(ImageStd[k]), float64(ImageMean[k])
		s.Src[k] = c
		a, b := 1/(g*255*std), (-float64(offset[c])/(g*255)-mean)/std
		// A main model normalized like the AuxUE gives 1 and 0 up to
		// rounding: snap, so that the export skips the identity.
		if math.Abs(a-1) < 1e-6 {
			a = 1
		}
		if math.Abs(b) < 1e-6 {
			b = 0
		}
		s.Gain[k], s.Offset[k] = float32(a), float32(b)
	}
	return s, nil
}

// IsIdentity reports whether the source is already the AuxUE's normalization.
func (s ImageSource) IsIdentity() bool { return s == IdentityImage() }

// InputContract is the AuxUE's input contract on depth maps: it reads the
// main model's image input (as the main model receives it) and its depth
// map at the input size, and computes its features on a grid of
// Factor x Factor blocks:
//
//	channels 0-2  block means of the image in the AuxUE's ImageNet normalization (ImageSource)
//	channel 3     block mean of the depth: min(max(d,0), MaxDepth)/MaxDepth for metric depth;
//	              for relative inverse depth r the frame's z-score (r - mean r)/(std r + 1e-6)
//	channel 4     with Row, the block mean of the row coordinate 2(y+0.5)/Height - 1
//
// The grid has ceil(Height/Factor) rows rounded up to a multiple of Bands
// (the DIDO head's global-context bands) and ceil(Width/Factor) columns;
// blocks past the image edge repeat its last row or column (ONNX Pad, mode
// edge, then AveragePool). The exported graph computes exactly this
// (pkg/onnx ExportAuxUEContract); training computes it in Go (Features).
type InputContract struct {
	Height, Width int
	Image         ImageSource
	Factor        int
	Bands         int
	MaxDepth      float32
	Relative      bool
	Row           bool
	// Model, when set, adds channels read from one of the main model's own
	// feature tensors after the row coordinate (ModelFeatures).
	Model *ModelFeatures `json:",omitempty"`
}

// Validate checks the contract.
func (c InputContract) Validate() error {
	switch {
	case c.Height < 1 || c.Width < 1:
		return fmt.Errorf("auxue input contract: size %dx%d", c.Width, c.Height)
	case c.Factor < 1 || c.Factor > 64:
		return fmt.Errorf("auxue input contract: factor %d, want 1 to 64", c.Factor)
	case c.Bands < 0:
		return fmt.Errorf("auxue input contract: %d bands", c.Bands)
	case !c.Relative && (!(c.MaxDepth > 0) || math.IsInf(float64(c.MaxDepth), 0)):
		return fmt.Errorf("auxue input contract: max depth %v must be positive", c.MaxDepth)
	case c.Image.Channels != 3 && c.Image.Channels != 1:
		return fmt.Errorf("auxue input contract: image with %d channels", c.Image.Channels)
	}
	for k := 0; k < 3; k++ {
		if c.Image.Src[k] < 0 || c.Image.Src[k] >= c.Image.Channels {
			return fmt.Errorf("auxue input contract: RGB channel %d read from input channel %d of %d", k, c.Image.Src[k], c.Image.Channels)
		}
	}
	if c.Model != nil {
		if err := c.Model.Validate(); err != nil {
			return fmt.Errorf("auxue input contract: %w", err)
		}
	}
	return nil
}

// BaseChannels is the number of channels computed from the image and the
// depth: 4, or 5 with Row.
func (c InputContract) BaseChannels() int {
	if c.Row {
		return 5
	}
	return 4
}

// Channels is the number of feature channels: BaseChannels, plus the
// main model's feature channels (Model.Out) when the contract reads them.
func (c InputContract) Channels() int {
	if c.Model != nil {
		return c.BaseChannels() + c.Model.Out
	}
	return c.BaseChannels()
}

// RowChannel is the index of the row-coordinate channel, -1 without it:
// the one channel a layout outlier leaves in place.
func (c InputContract) RowChannel() int {
	if c.Row {
		return 4
	}
	return -1
}

// Grid returns the grid's rows and columns.
func (c InputContract) Grid() (gh, gw int) {
	f := c.Factor
	gh = (c.Height + f - 1) / f
	if b := max(c.Bands, 1); gh%b != 0 {
		gh += b - gh%b
	}
	return gh, (c.Width + f - 1) / f
}

// RowFeature returns the row-coordinate channel on the grid (gh values;
// every column of row v holds the v-th).
func (c InputContract) RowFeature() []float32 {
	gh, _ := c.Grid()
	out := make([]float32, gh)
	f := c.Factor
	for v := range out {
		var s float64
		for dv := 0; dv < f; dv++ {
			y := min(v*f+dv, c.Height-1)
			s += 2*(float64(y)+0.5)/float64(c.Height) - 1
		}
		out[v] = float32(s / float64(f))
	}
	return out
}

// ContractScratch holds Features' buffers between calls.
type ContractScratch struct {
	plane []float32
	model []float32
}

// Features computes the AuxUE's features (Channels() x gh x gw, into dst)
// from the main model's image input (its layout, Height x Width) and the
// depth map (Height x Width; metres, or relative inverse depth). A
// contract with Model takes FeaturesWith.
func (c InputContract) Features(image, depth []float32, dst []float32, sc *ContractScratch) error {
	return c.FeaturesWith(image, depth, nil, dst, sc)
}

// FeaturesWith is Features with the main model's feature tensor (Model's
// (1, Channels, Height, Width), NCHW) for a contract that reads it: its
// channels are projected, resized to the grid and normalized
// (ModelFeatures.Apply) after the row coordinate.
func (c InputContract) FeaturesWith(image, depth, feat []float32, dst []float32, sc *ContractScratch) error {
	H, W := c.Height, c.Width
	hw := H * W
	gh, gw := c.Grid()
	g := gh * gw
	switch {
	case c.Model == nil && feat != nil:
		return fmt.Errorf("auxue features: a feature tensor for a contract that reads none")
	case c.Model != nil && len(feat) != c.Model.Channels*c.Model.Height*c.Model.Width:
		return fmt.Errorf("auxue features: feature tensor %q has %d values, want %d x %d x %d", c.Model.Tensor, len(feat), c.Model.Channels, c.Model.Height, c.Model.Width)
	case len(image) != c.Image.Channels*hw:
		return fmt.Errorf("auxue features: image has %d values, want %d x %d x %d", len(image), c.Image.Channels, H, W)
	case len(depth) != hw:
		return fmt.Errorf("auxue features: depth has %d values, want %d x %d", len(depth), H, W)
	case len(dst) != c.Channels()*g:
		return fmt.Errorf("auxue features: %d destination values, want %d x %d x %d", len(dst), c.Channels(), gh, gw)
	}
	if cap(sc.plane) < hw {
		sc.plane = make([]float32, hw)
	}
	plane := sc.plane[:hw]
	ch := c.Image.Channels
	for k := 0; k < 3; k++ {
		src, a, b := c.Image.Src[k], c.Image.Gain[k], c.Image.Offset[k]
		if c.Image.NHWC {
			for i := range plane {
				plane[i] = image[i*ch+src]*a + b
			}
		} else {
			p := image[src*hw : (src+1)*hw]
			for i, v := range p {
				plane[i] = v*a + b
			}
		}
		c.pool(plane, dst[k*g:(k+1)*g], 1)
	}
	if c.Relative {
		var sum float64
		for _, v := range depth {
			sum += float64(v)
		}
		mean := sum / float64(hw)
		var ss float64
		for _, v := range depth {
			d := float64(v) - mean
			ss += d * d
		}
		inv := 1 / (math.Sqrt(ss/float64(hw)) + 1e-6)
		for i, v := range depth {
			plane[i] = float32((float64(v) - mean) * inv)
		}
		c.pool(plane, dst[3*g:4*g], 1)
	} else {
		m := c.MaxDepth
		for i, v := range depth {
			plane[i] = min(max(v, 0), m)
		}
		c.pool(plane, dst[3*g:4*g], 1/m)
	}
	if c.Row {
		rows := c.RowFeature()
		out := dst[4*g : 5*g]
		for v := 0; v < gh; v++ {
			for u := 0; u < gw; u++ {
				out[v*gw+u] = rows[v]
			}
		}
	}
	if c.Model != nil {
		base := c.BaseChannels()
		return c.Model.Apply(feat, dst[base*g:], gh, gw, &sc.model)
	}
	return nil
}

// pool writes the f x f block means of an H x W plane (edges repeated past
// the border) times scale into out (gh x gw).
func (c InputContract) pool(plane, out []float32, scale float32) {
	H, W, f := c.Height, c.Width, c.Factor
	gh, gw := c.Grid()
	norm := scale / float32(f*f)
	for v := 0; v < gh; v++ {
		for u := 0; u < gw; u++ {
			var s float32
			for dv := 0; dv < f; dv++ {
				row := plane[min(v*f+dv, H-1)*W:]
				x0 := u * f
				if x0+f <= W {
					for _, x := range row[x0 : x0+f] {
						s += x
					}
					continue
				}
				for du := 0; du < f; du++ {
					s += row[min(x0+du, W-1)]
				}
			}
			out[v*gw+u] = s * norm
		}
	}
}
