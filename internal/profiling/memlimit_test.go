package profiling

import "testing"

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{{"3GiB", 3 << 30, true}, {"512MiB", 512 << 20, true}, {"1.5 GiB", 3 << 29, true}, {"100", 100, true},
		{"0", 0, true}, {"7B", 7, true}, {"2KiB", 2048, true}, {"-1GiB", 0, false}, {"lots", 0, false}, {"", 0, false},
		{"Inf", 0, false}, {"1e30GiB", 0, false}} {
		got, err := ParseBytes(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
