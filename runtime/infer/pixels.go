package infer

// PixelTransform is the per-channel affine map from an 8-bit pixel value to
// the input value, x = p*Gain[c] + Offset[c], in the order the input holds
// the channels (Order[c] is the RGB index stored at input channel c).
type PixelTransform struct {
	Gain, Offset [3]float32
	Order        [3]int
}

// Pixels returns the spec's pixel transform: gain = range/(255 std),
// offset = -mean/std, channel order by color.
func (s IOSpec) Pixels() PixelTransform {
	in := s.Input
	pr := in.PixelRange
	if pr == 0 {
		pr = 1
	}
	t := PixelTransform{Order: [3]int{0, 1, 2}}
	if in.Color == ColorBGR {
		t.Order = [3]int{2, 1, 0}
	}
	for c := range 3 {
		mean, std := float32(0), float32(1)
		if len(in.Mean) > 0 {
			mean = in.Mean[min(c, len(in.Mean)-1)]
		}
		if len(in.Std) > 0 {
			std = in.Std[min(c, len(in.Std)-1)]
		}
		t.Gain[c] = pr / (255 * std)
		t.Offset[c] = -mean / std
	}
	return t
}

func (s IOSpec) pixelRange() float32 {
	if s.Input.PixelRange == 0 {
		return 1
	}
	return s.Input.PixelRange
}

// means and stds are the input's mean and std with their defaults (0, 1).
func (s IOSpec) means() []float32 { return withDefault(s.Input.Mean, s.channels(), 0) }

func (s IOSpec) stds() []float32 { return withDefault(s.Input.Std, s.channels(), 1) }

func withDefault(v []float32, n int, d float32) []float32 {
	if len(v) > 0 {
		return v
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = d
	}
	return out
}
