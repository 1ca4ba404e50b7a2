package h264

import "fmt"

// Codec selects the bitstream the Decoder expects.
type Codec int

// Supported codecs.
const (
	H264 Codec = iota
	H265
)

func (c Codec) String() string {
	switch c {
	case H264:
		return "H264"
	case H265:
		return "H265"
	}
	return fmt.Sprintf("Codec(%d)", int(c))
}

// EncoderConfig configures an Encoder.
type EncoderConfig struct {
	Width, Height int // even
	FPS           int // frames per second, > 0
	GOP           int // frames between IDR pictures; default FPS
	Bitrate       int // bits per second; default 2 Mbit/s
}
