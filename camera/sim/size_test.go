package sim

import "testing"

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		h, w int
		ok   bool
	}{{"192x640", 192, 640, true}, {"48X160", 48, 160, true}, {"640", 0, 0, false}, {"0x5", 0, 0, false},
		{"5x-1", 0, 0, false}, {"ax5", 0, 0, false}, {"5x", 0, 0, false}, {"", 0, 0, false}} {
		h, w, err := ParseSize(tc.in)
		if (err == nil) != tc.ok || h != tc.h || w != tc.w {
			t.Errorf("ParseSize(%q) = %d, %d, %v; want %d, %d (ok %v)", tc.in, h, w, err, tc.h, tc.w, tc.ok)
		}
	}
}
