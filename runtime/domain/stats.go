package domain

import (
	"fmt"
	"math"
	"strconv"
)

// Layout fixes which pooled statistics make a frame's vector and in which
// order (Names). The record stores it, so that the runtime extracts the
// vector the record was fitted on.
type Layout struct {
	// ImageBands: horizontal bands of the picture whose channel means are
	// kept (the sky above, the road below: 2).
	ImageBands int `yaml:"image_bands"`
	// MapBands: horizontal bands of the depth, K/S and scale maps.
	MapBands int `yaml:"map_bands"`
	// FeatureGroups: the depth model's feature tensor pooled into this
	// many channel groups (0: the AuxUE reads no feature tensor).
	FeatureGroups int `yaml:"feature_groups,omitempty"`
}

// DefaultLayout is the layout train auxue records: 2 picture bands, 4 map
// bands, and 8 feature groups when the AuxUE reads the depth model's
// features (features true).
func DefaultLayout(features bool) Layout {
	l := Layout{ImageBands: 2, MapBands: 4}
	if features {
		l.FeatureGroups = 8
	}
	return l
}

// Validate checks the layout's sizes.
func (l Layout) Validate() error {
	switch {
	case l.ImageBands < 1 || l.ImageBands > 16:
		return fmt.Errorf("image_bands: %d, want 1..16", l.ImageBands)
	case l.MapBands < 1 || l.MapBands > 16:
		return fmt.Errorf("map_bands: %d, want 1..16", l.MapBands)
	case l.FeatureGroups < 0 || l.FeatureGroups > 64:
		return fmt.Errorf("feature_groups: %d, want 0..64", l.FeatureGroups)
	}
	return nil
}

// Dim is the length of a frame's statistics vector.
func (l Layout) Dim() int { return 3*l.ImageBands + 6 + 3*l.MapBands + 1 + l.FeatureGroups }

// Offsets of the groups in the vector.
func (l Layout) imageStd() int    { return 3 * l.ImageBands }
func (l Layout) imageGrad() int   { return l.imageStd() + 3 }
func (l Layout) depthBands() int  { return l.imageGrad() + 3 }
func (l Layout) depthSpread() int { return l.depthBands() + l.MapBands }
func (l Layout) ksBands() int     { return l.depthSpread() + 1 }
func (l Layout) scaleBands() int  { return l.ksBands() + l.MapBands }
func (l Layout) features() int    { return l.scaleBands() + l.MapBands }

// Names are the vector's components, in order.
func (l Layout) Names() []string {
	names := make([]string, 0, l.Dim())
	rgb := []string{"r", "g", "b"}
	for b := range l.ImageBands {
		for _, c := range rgb {
			names = append(names, "image_mean_band"+strconv.Itoa(b)+"_"+c)
		}
	}
	for _, c := range rgb {
		names = append(names, "image_std_"+c)
	}
	for _, c := range rgb {
		names = append(names, "image_log_gradient_"+c)
	}
	for b := range l.MapBands {
		names = append(names, "depth_log_mean_band"+strconv.Itoa(b))
	}
	names = append(names, "depth_log_std")
	for b := range l.MapBands {
		names = append(names, "ks_mean_band"+strconv.Itoa(b))
	}
	for b := range l.MapBands {
		names = append(names, "scale_log_mean_band"+strconv.Itoa(b))
	}
	for g := range l.FeatureGroups {
		names = append(names, "feature_mean_group"+strconv.Itoa(g))
	}
	return names
}

// Frame is what the models saw and said for one frame. Slices are read,
// never kept.
type Frame struct {
	// RGB is the picture at the depth model's input size, interleaved
	// 8-bit R, G, B, Width x Height.
	RGB           []uint8
	Width, Height int
	// Depth is the depth read-out on its grid (metres, or a relative
	// model's inverse depth: positive either way), DepthW x DepthH.
	Depth          []float32
	DepthW, DepthH int
	// Epistemic (K/S) and Scale (the Laplace b) on the AuxUE's grid.
	Epistemic, Scale []float32
	AuxW, AuxH       int
	// Features is the depth model's feature tensor the AuxUE reads, NCHW
	// with N = 1 (nil when the AuxUE reads none).
	Features                     []float32
	FeatureC, FeatureH, FeatureW int
}

// Extractor computes a frame's statistics vector for a layout. It holds
// no per-frame state and allocates nothing.
type Extractor struct {
	l Layout
}

// NewExtractor returns the extractor of layout l.
func NewExtractor(l Layout) (*Extractor, error) {
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("domain layout: %w", err)
	}
	return &Extractor{l: l}, nil
}

// Layout is the extractor's layout.
func (e *Extractor) Layout() Layout { return e.l }

// imageStride: every fourth row and column of the picture enters the
// means and spreads (a 16x smaller sum with the same expectation); the
// gradient takes the right neighbour of each sampled pixel, so that
// pixel-scale noise and blur show in it at full resolution.
const imageStride = 4

// logFloor keeps logarithms of maps finite (metres or relative units).
const logFloor = 1e-6

// Extract writes f's statistics into dst (len Layout.Dim()). Non-finite
// map values are skipped; a band without a finite value contributes 0.
func (e *Extractor) Extract(f *Frame, dst []float64) error {
	l := e.l
	if len(dst) != l.Dim() {
		return fmt.Errorf("domain statistics: destination has %d values, layout needs %d", len(dst), l.Dim())
	}
	if err := f.check(l); err != nil {
		return err
	}
	e.image(f, dst)
	dst[l.depthSpread()] = bandLogMean(f.Depth, f.DepthW, f.DepthH, l.MapBands, dst[l.depthBands():l.depthSpread()], true)
	bandLogMean(f.Epistemic, f.AuxW, f.AuxH, l.MapBands, dst[l.ksBands():l.scaleBands()], false)
	bandLogMean(f.Scale, f.AuxW, f.AuxH, l.MapBands, dst[l.scaleBands():l.features()], true)
	if l.FeatureGroups > 0 {
		featureGroups(f, dst[l.features():])
	}
	return nil
}

func (f *Frame) check(l Layout) error {
	switch {
	case f.Width < 2 || f.Height < l.ImageBands || len(f.RGB) != 3*f.Width*f.Height:
		return fmt.Errorf("domain statistics: picture %dx%d with %d bytes", f.Width, f.Height, len(f.RGB))
	case f.DepthH < l.MapBands || f.DepthW < 1 || len(f.Depth) != f.DepthW*f.DepthH:
		return fmt.Errorf("domain statistics: depth %dx%d with %d values", f.DepthW, f.DepthH, len(f.Depth))
	case f.AuxH < l.MapBands || f.AuxW < 1 || len(f.Epistemic) != f.AuxW*f.AuxH || len(f.Scale) != f.AuxW*f.AuxH:
		return fmt.Errorf("domain statistics: AuxUE maps %dx%d with %d and %d values", f.AuxW, f.AuxH, len(f.Epistemic), len(f.Scale))
	case l.FeatureGroups > 0 && (f.FeatureC < l.FeatureGroups || f.FeatureH*f.FeatureW < 1 || len(f.Features) != f.FeatureC*f.FeatureH*f.FeatureW):
		return fmt.Errorf("domain statistics: feature tensor %dx%dx%d with %d values for %d groups", f.FeatureC, f.FeatureH, f.FeatureW, len(f.Features), l.FeatureGroups)
	}
	return nil
}

// image fills the picture's groups: channel means per band, channel
// standard deviations, and log mean |I(x+1,y) - I(x,y)| per channel (on
// [0,1] values).
func (e *Extractor) image(f *Frame, dst []float64) {
	l := e.l
	var sum, sq, grad [3]float64
	var n, ng float64
	w, h := f.Width, f.Height
	band := 0
	var bsum [3]float64
	var bn float64
	flush := func() {
		for c := range 3 {
			if bn > 0 {
				dst[3*band+c] = bsum[c] / bn / 255
			} else {
				dst[3*band+c] = 0
			}
			bsum[c] = 0
		}
		bn = 0
	}
	for y := 0; y < h; y += imageStride {
		if b := y * l.ImageBands / h; b != band {
			flush()
			band = b
		}
		row := f.RGB[3*y*w : 3*(y+1)*w]
		for x := 0; x+1 < w; x += imageStride {
			p := row[3*x : 3*x+6]
			for c := range 3 {
				v := float64(p[c])
				sum[c] += v
				sq[c] += v * v
				bsum[c] += v
				grad[c] += math.Abs(float64(p[3+c]) - v)
			}
			n++
			bn++
			ng++
		}
	}
	flush()
	for b := band + 1; b < l.ImageBands; b++ { // bands without a sampled row
		for c := range 3 {
			dst[3*b+c] = 0
		}
	}
	for c := range 3 {
		m := sum[c] / n
		dst[l.imageStd()+c] = math.Sqrt(max(0, sq[c]/n-m*m)) / 255
		dst[l.imageGrad()+c] = math.Log(grad[c]/ng/255 + 1e-4)
	}
}

// mapSamples bounds the samples a map's statistics are taken over: rows
// and columns are strided (mapStride) so that about this many remain.
const mapSamples = 4096

// mapStride is the row and column step that leaves at most about
// mapSamples of a w x h map (the same step both ways keeps the sampling
// isotropic).
func mapStride(w, h int) int {
	s := 1
	for (w/s)*(h/s) > mapSamples {
		s++
	}
	return s
}

// bandLogMean writes the mean of log(max(v, logFloor)) (log true) or of v
// over the sampled finite values of each of len(dst) horizontal bands of a
// w x h map, and returns the standard deviation of the same values over
// the whole map.
func bandLogMean(m []float32, w, h, bands int, dst []float64, log bool) float64 {
	st := mapStride(w, h)
	var ts, tsq float64
	var tn int
	for b := range bands {
		y0, y1 := b*h/bands, (b+1)*h/bands
		var s float64
		var n int
		for y := y0; y < y1; y += st {
			row := m[y*w : (y+1)*w]
			for x := 0; x < w; x += st {
				v := float64(row[x])
				if math.IsNaN(v) || math.IsInf(v, 0) {
					continue
				}
				if log {
					v = math.Log(max(v, logFloor))
				}
				s += v
				tsq += v * v
				n++
			}
		}
		ts += s
		tn += n
		if n > 0 {
			dst[b] = s / float64(n)
		} else {
			dst[b] = 0
		}
	}
	if tn == 0 {
		return 0
	}
	mu := ts / float64(tn)
	return math.Sqrt(max(0, tsq/float64(tn)-mu*mu))
}

// featureGroups writes the mean of each of len(dst) contiguous channel
// groups of the feature tensor (channel c is in group c*G/C).
func featureGroups(f *Frame, dst []float64) {
	g := len(dst)
	hw := f.FeatureH * f.FeatureW
	for j := range dst {
		c0, c1 := j*f.FeatureC/g, (j+1)*f.FeatureC/g
		var s float64
		var n int
		for _, v := range f.Features[c0*hw : c1*hw] {
			x := float64(v)
			if math.IsNaN(x) || math.IsInf(x, 0) {
				continue
			}
			s += x
			n++
		}
		if n > 0 {
			dst[j] = s / float64(n)
		} else {
			dst[j] = 0
		}
	}
}
