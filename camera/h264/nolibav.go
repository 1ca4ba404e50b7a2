//go:build nolibav

package h264

import "errors"

// ErrNoLibav is returned by every codec constructor in a build made with the
// nolibav tag: such a binary links no FFmpeg library, so it runs on any
// system whatever its libavcodec soname, and takes M-JPEG cameras only.
var ErrNoLibav = errors.New("h264: built with -tags nolibav: H.264/H.265 need a build with libavcodec (M-JPEG still works)")

// Decoder is unavailable in nolibav builds; NewDecoder always fails.
type Decoder struct{ codec Codec }

// NewDecoder fails with ErrNoLibav.
func NewDecoder(codec Codec) (*Decoder, error) { return nil, ErrNoLibav }

// Codec returns the codec the decoder was asked for.
func (d *Decoder) Codec() Codec { return d.codec }

// Close does nothing.
func (d *Decoder) Close() {}

// Decode fails with ErrNoLibav.
func (d *Decoder) Decode(au [][]byte, dst []uint8) (out []uint8, width, height int, ok bool, err error) {
	return dst, 0, 0, false, ErrNoLibav
}

// Encoder is unavailable in nolibav builds; NewEncoder always fails.
type Encoder struct{}

// NewEncoder fails with ErrNoLibav.
func NewEncoder(cfg EncoderConfig) (*Encoder, error) { return nil, ErrNoLibav }

// Close does nothing.
func (e *Encoder) Close() {}

// Encode fails with ErrNoLibav.
func (e *Encoder) Encode(rgb []uint8, dst []byte) ([]byte, error) { return dst, ErrNoLibav }
