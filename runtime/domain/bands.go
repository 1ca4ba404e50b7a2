package domain

import (
	"fmt"
	"math"
)

// FrameBands writes a frame's per-band values that the record's KS and
// BOverDepth quantiles are taken over: the band's mean K/S into ks and
// exp(mean log b - mean log depth) (the band's geometric-mean b over its
// geometric-mean depth) into bd, both of length MapBands. x is the frame's
// statistics vector (Extract).
func (l Layout) FrameBands(x, ks, bd []float64) error {
	if len(x) != l.Dim() || len(ks) != l.MapBands || len(bd) != l.MapBands {
		return fmt.Errorf("domain bands: %d statistics and %d, %d band values for a layout of %d statistics and %d bands",
			len(x), len(ks), len(bd), l.Dim(), l.MapBands)
	}
	for b := range l.MapBands {
		ks[b] = x[l.ksBands()+b]
		bd[b] = math.Exp(x[l.scaleBands()+b] - x[l.depthBands()+b])
	}
	return nil
}
