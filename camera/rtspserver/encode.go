package rtspserver

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"

	"github.com/bluenviron/gortsplib/v4/pkg/format"
	"github.com/bluenviron/gortsplib/v4/pkg/format/rtph264"
	"github.com/bluenviron/gortsplib/v4/pkg/format/rtpmjpeg"
	"github.com/pion/rtp"

	"github.com/didoedge/didoedge/camera/h264"
)

// Codec names accepted in Generated.Codec.
const (
	CodecMJPEG = "mjpeg"
	CodecH264  = "h264"
)

// frameEncoder compresses RGB24 pictures into RTP packets (timestamps are
// set by the caller).
type frameEncoder interface {
	encode(rgb []uint8) ([]*rtp.Packet, error)
	close()
}

// newFormat returns the RTP format a generated path announces. For H.264
// it encodes one blank picture to learn the SPS/PPS for the SDP, which
// lets readers such as ffprobe report the size before the first IDR.
func newFormat(g Generated, w, h int) (format.Format, error) {
	switch g.Codec {
	case CodecMJPEG:
		return &format.MJPEG{}, nil
	case CodecH264:
		enc, err := h264.NewEncoder(h264.EncoderConfig{Width: w, Height: h, FPS: int(g.FPS + 0.5)})
		if err != nil {
			return nil, err
		}
		defer enc.Close()
		au, err := enc.Encode(make([]uint8, w*h*3), nil)
		if err != nil {
			return nil, err
		}
		units, err := h264.SplitAnnexB(nil, au)
		if err != nil {
			return nil, err
		}
		f := &format.H264{PayloadTyp: 96, PacketizationMode: 1}
		for _, u := range units {
			switch u[0] & 0x1f {
			case 7:
				f.SPS = bytes.Clone(u)
			case 8:
				f.PPS = bytes.Clone(u)
			}
		}
		return f, nil
	}
	return nil, fmt.Errorf("codec %q (want %s or %s)", g.Codec, CodecMJPEG, CodecH264)
}

func newFrameEncoder(g Generated, f format.Format, w, h int) (frameEncoder, error) {
	switch f := f.(type) {
	case *format.MJPEG:
		rtpEnc, err := f.CreateEncoder()
		if err != nil {
			return nil, err
		}
		return &mjpegEncoder{rtp: rtpEnc, img: image.NewRGBA(image.Rect(0, 0, w, h)), opts: &jpeg.Options{Quality: g.Quality}}, nil
	case *format.H264:
		rtpEnc, err := f.CreateEncoder()
		if err != nil {
			return nil, err
		}
		enc, err := h264.NewEncoder(h264.EncoderConfig{Width: w, Height: h, FPS: int(g.FPS + 0.5)})
		if err != nil {
			return nil, err
		}
		return &h264Encoder{rtp: rtpEnc, enc: enc}, nil
	}
	return nil, fmt.Errorf("no encoder for %s", f.Codec())
}

// mjpegEncoder: image/jpeg (baseline, 4:2:0) and RFC 2435 packetization.
type mjpegEncoder struct {
	rtp  *rtpmjpeg.Encoder
	img  *image.RGBA
	jpg  bytes.Buffer
	opts *jpeg.Options
}

func (e *mjpegEncoder) encode(rgb []uint8) ([]*rtp.Packet, error) {
	rgbToRGBA(rgb, e.img.Pix)
	e.jpg.Reset()
	if err := jpeg.Encode(&e.jpg, e.img, e.opts); err != nil {
		return nil, fmt.Errorf("jpeg encode: %w", err)
	}
	return e.rtp.Encode(e.jpg.Bytes())
}

func (e *mjpegEncoder) close() {}

func rgbToRGBA(rgb, rgba []uint8) {
	for i, j := 0, 0; i+2 < len(rgb); i, j = i+3, j+4 {
		rgba[j], rgba[j+1], rgba[j+2], rgba[j+3] = rgb[i], rgb[i+1], rgb[i+2], 255
	}
}

// h264Encoder: libx264 through libavcodec and RFC 6184 packetization.
type h264Encoder struct {
	rtp   *rtph264.Encoder
	enc   *h264.Encoder
	au    []byte
	units [][]byte
}

func (e *h264Encoder) encode(rgb []uint8) ([]*rtp.Packet, error) {
	var err error
	if e.au, err = e.enc.Encode(rgb, e.au); err != nil {
		return nil, err
	}
	if len(e.au) == 0 {
		return nil, nil
	}
	if e.units, err = h264.SplitAnnexB(e.units[:0], e.au); err != nil {
		return nil, err
	}
	return e.rtp.Encode(e.units)
}

func (e *h264Encoder) close() { e.enc.Close() }
