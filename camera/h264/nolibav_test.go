//go:build nolibav

package h264

import (
	"errors"
	"testing"
)

// A nolibav build must refuse every codec with ErrNoLibav, never pretend to decode.
func TestNoLibavRefuses(t *testing.T) {
	for _, c := range []Codec{H264, H265} {
		if _, err := NewDecoder(c); !errors.Is(err, ErrNoLibav) {
			t.Errorf("NewDecoder(%v) error = %v, want ErrNoLibav", c, err)
		}
	}
	if _, err := NewEncoder(EncoderConfig{Width: 64, Height: 48, FPS: 15}); !errors.Is(err, ErrNoLibav) {
		t.Errorf("NewEncoder error = %v, want ErrNoLibav", err)
	}
	var d Decoder
	if _, _, _, ok, err := d.Decode(nil, nil); ok || !errors.Is(err, ErrNoLibav) {
		t.Errorf("Decode = ok %v, err %v; want false, ErrNoLibav", ok, err)
	}
}
