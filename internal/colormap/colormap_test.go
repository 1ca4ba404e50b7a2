package colormap

import "testing"

// TestHeatStops: the stops themselves at 0, 1/4, ..., 1, and the exact
// midpoint (rounded half up) between the first two.
func TestHeatStops(t *testing.T) {
	for _, tc := range []struct {
		v       float64
		r, g, b uint8
	}{
		{0, 20, 20, 120}, {0.25, 0, 170, 220}, {0.5, 40, 190, 60}, {0.75, 250, 220, 30}, {1, 220, 30, 30},
		{0.125, 10, 95, 170}, // (20+0)/2, (20+170)/2, (120+220)/2
	} {
		if r, g, b := Heat(tc.v); r != tc.r || g != tc.g || b != tc.b {
			t.Errorf("Heat(%g) = %d,%d,%d, want %d,%d,%d", tc.v, r, g, b, tc.r, tc.g, tc.b)
		}
	}
}
