package metrics

import (
	"fmt"
	"math"
)

// SkyClass is the semantic id of the sky in every data set the project
// writes (Cityscapes id 23; the indoor world never uses it).
const SkyClass = 23

// SkyAll is the DIDO paper's sky metric for one image: min-max normalize the
// uncertainty map over all its (finite) pixels, u' = (u - min)/(max - min),
// then average (1 - u')^2 over the sky pixels (labels == skyID). 0 means the
// sky carries the image's highest uncertainty everywhere; lower is better.
// A constant map normalizes to 0 (score 1: it separates nothing). ok is
// false when the image has no sky pixel.
func SkyAll(unc []float32, labels []uint8, skyID uint8) (score float64, ok bool, err error) {
	if len(unc) != len(labels) {
		return 0, false, fmt.Errorf("sky-all: %d uncertainties, %d labels", len(unc), len(labels))
	}
	// Min and max over the finite values (exponent bits not all ones), with
	// plain comparisons: the evaluation calls this for every map of every
	// frame. ±0 may come out as either zero, which changes no difference.
	lo32, hi32 := float32(math.Inf(1)), float32(math.Inf(-1))
	for _, u := range unc {
		if math.Float32bits(u)&0x7f800000 == 0x7f800000 {
			continue
		}
		if u < lo32 {
			lo32 = u
		}
		if u > hi32 {
			hi32 = u
		}
	}
	lo, hi := float64(lo32), float64(hi32)
	span := hi - lo
	var sum float64
	n := 0
	for i, l := range labels {
		if l != skyID {
			continue
		}
		v := float64(unc[i])
		norm := 0.0
		switch {
		case math.IsNaN(v):
			norm = 0 // no information counts as the lowest uncertainty
		case span > 0:
			norm = math.Min(math.Max((v-lo)/span, 0), 1)
		}
		sum += (1 - norm) * (1 - norm)
		n++
	}
	if n == 0 {
		return math.NaN(), false, nil
	}
	return sum / float64(n), true, nil
}
