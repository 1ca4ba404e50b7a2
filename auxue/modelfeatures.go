package auxue

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// DefaultModelFeatureChannels bounds the main-model channels an AuxUE reads
// unless told otherwise: a wider tensor is first projected to this many
// channels (ModelFeatures.Projection), so that the AuxUE's first
// convolution and the training cache stay the size of a few image
// channels whatever the main model. 8 measured better than 32 (the
// unprojected tensor) on the byo walkthrough's data (docs/training.md,
// "The depth model's own features").
const DefaultModelFeatureChannels = 8

// ModelFeatures is one of the main model's own feature tensors read by the
// AuxUE (the paper's AuxUE reads its main model's features): the tensor
// (1, Channels, Height, Width) of the main model's graph, typically at 1/4
// to 1/8 of its input. On the AuxUE's grid it becomes Out channels:
//
//	p = P x            Projection (Out x Channels, row-major), or x itself when nil (Out = Channels)
//	q = resize(p)      bilinear to the grid (half-pixel centres, ONNX Resize linear / half_pixel, no antialiasing)
//	u = (q - Mean)/Std per channel, when Mean is set (training sets it from its frames)
//
// The projection is linear, so it commutes with the resize; it runs first,
// at the tensor's resolution, where it is cheaper.
type ModelFeatures struct {
	Tensor                  string
	Channels, Height, Width int
	Out                     int
	Projection              []float32 `json:",omitempty"`
	Mean, Std               []float32 `json:",omitempty"`
}

// NewModelFeatures describes a feature tensor of c x h x w read as at most
// out channels (0: DefaultModelFeatureChannels). With more channels than that
// it gets a seeded Gaussian projection (entries N(0, 1/c): a random
// projection keeps the distances between feature vectors up to a small
// distortion, Johnson-Lindenstrauss) to out channels.
func NewModelFeatures(tensor string, c, h, w, out int, seed uint64) (*ModelFeatures, error) {
	if out <= 0 {
		out = DefaultModelFeatureChannels
	}
	m := &ModelFeatures{Tensor: tensor, Channels: c, Height: h, Width: w, Out: c}
	if c > out {
		m.Out = out
		rng := rand.New(rand.NewPCG(seed, 0x70726f6a))
		m.Projection = make([]float32, m.Out*c)
		s := 1 / math.Sqrt(float64(c))
		for i := range m.Projection {
			m.Projection[i] = float32(rng.NormFloat64() * s)
		}
	}
	return m, m.Validate()
}

// Validate checks the description.
func (m *ModelFeatures) Validate() error {
	switch {
	case m.Tensor == "":
		return fmt.Errorf("model features: no tensor name")
	case m.Channels < 1 || m.Height < 1 || m.Width < 1 || m.Channels > 1<<16 || m.Height > 1<<14 || m.Width > 1<<14:
		return fmt.Errorf("model features %q: shape (1,%d,%d,%d)", m.Tensor, m.Channels, m.Height, m.Width)
	case m.Out < 1 || (m.Projection == nil && m.Out != m.Channels):
		return fmt.Errorf("model features %q: %d output channels for %d input channels without a projection", m.Tensor, m.Out, m.Channels)
	case m.Projection != nil && len(m.Projection) != m.Out*m.Channels:
		return fmt.Errorf("model features %q: projection of %d values, want %d x %d", m.Tensor, len(m.Projection), m.Out, m.Channels)
	case len(m.Mean) != len(m.Std) || (m.Mean != nil && len(m.Mean) != m.Out):
		return fmt.Errorf("model features %q: %d means and %d stds for %d channels", m.Tensor, len(m.Mean), len(m.Std), m.Out)
	}
	for i, s := range m.Std {
		if !(s > 0) || math.IsInf(float64(s), 0) || math.IsNaN(float64(m.Mean[i])) || math.IsInf(float64(m.Mean[i]), 0) {
			return fmt.Errorf("model features %q: channel %d has mean %g and std %g, want finite values and std > 0", m.Tensor, i, m.Mean[i], m.Std[i])
		}
	}
	return nil
}

// Apply writes the tensor feat (Channels x Height x Width) as Out x gh x gw
// grid channels into dst: projected, resized and, when Mean is set,
// normalized. scratch keeps the projection between calls.
func (m *ModelFeatures) Apply(feat, dst []float32, gh, gw int, scratch *[]float32) error {
	hw, g := m.Height*m.Width, gh*gw
	if len(feat) != m.Channels*hw || len(dst) < m.Out*g {
		return fmt.Errorf("model features %q: %d values in, %d out, want %d and %d", m.Tensor, len(feat), len(dst), m.Channels*hw, m.Out*g)
	}
	src := feat
	if m.Projection != nil {
		if cap(*scratch) < m.Out*hw {
			*scratch = make([]float32, m.Out*hw)
		}
		p := (*scratch)[:m.Out*hw]
		clear(p)
		for o := 0; o < m.Out; o++ {
			row, po := m.Projection[o*m.Channels:(o+1)*m.Channels], p[o*hw:(o+1)*hw]
			for c, w := range row {
				for i, x := range feat[c*hw : (c+1)*hw] {
					po[i] += w * x
				}
			}
		}
		src = p
	}
	for o := 0; o < m.Out; o++ {
		ResizeBilinear(src[o*hw:(o+1)*hw], m.Height, m.Width, dst[o*g:(o+1)*g], gh, gw)
	}
	if m.Mean != nil {
		m.Normalize(dst[:m.Out*g], g)
	}
	return nil
}

// Normalize applies (q - Mean)/Std in place to Out channel planes of g
// values (the model-feature block of a record).
func (m *ModelFeatures) Normalize(block []float32, g int) {
	for o := 0; o < m.Out; o++ {
		mean, std := m.Mean[o], m.Std[o]
		p := block[o*g : (o+1)*g]
		for i, x := range p {
			p[i] = (x - mean) / std
		}
	}
}

// ResizeBilinear resizes one h x w plane to oh x ow as ONNX Resize does
// with mode linear, coordinate_transformation_mode half_pixel and no
// antialiasing (ONNX Runtime): the source coordinate of output pixel x is
// (x + 0.5)/s - 0.5 with s = ow/w in float32, clamped to [0, w - 1], and
// the value interpolates its two neighbours along each axis.
func ResizeBilinear(src []float32, h, w int, dst []float32, oh, ow int) {
	if h == oh && w == ow {
		copy(dst, src[:h*w])
		return
	}
	type tap struct {
		i0, i1 int
		f      float32
	}
	taps := func(n, on int) []tap {
		s := float32(on) / float32(n)
		t := make([]tap, on)
		for x := range t {
			c := (float32(x)+0.5)/s - 0.5
			c = min(max(c, 0), float32(n-1))
			i0 := min(int(c), n-1)
			t[x] = tap{i0: i0, i1: min(i0+1, n-1), f: c - float32(i0)}
		}
		return t
	}
	ty, tx := taps(h, oh), taps(w, ow)
	for y, a := range ty {
		r0, r1 := src[a.i0*w:(a.i0+1)*w], src[a.i1*w:(a.i1+1)*w]
		out := dst[y*ow : (y+1)*ow]
		for x, b := range tx {
			top := r0[b.i0]*(1-b.f) + r0[b.i1]*b.f
			bot := r1[b.i0]*(1-b.f) + r1[b.i1]*b.f
			out[x] = top*(1-a.f) + bot*a.f
		}
	}
}
