package camera

import (
	"errors"
	"fmt"

	"github.com/bluenviron/gortsplib/v4/pkg/format"
	"github.com/bluenviron/gortsplib/v4/pkg/format/rtph264"
	"github.com/bluenviron/gortsplib/v4/pkg/format/rtph265"
	"github.com/bluenviron/gortsplib/v4/pkg/format/rtpmjpeg"
	mch264 "github.com/bluenviron/mediacommon/v2/pkg/codecs/h264"
	mch265 "github.com/bluenviron/mediacommon/v2/pkg/codecs/h265"
	"github.com/pion/rtp"

	"github.com/didoedge/didoedge/camera/h264"
)

// videoPipeline turns the RTP packets of one video format into RGB pictures:
// RTP depacketization (gortsplib's RFC 6184 / 7798 / 2435 decoders), then
// libavcodec for H.264/H.265 or image/jpeg for M-JPEG.
type videoPipeline struct {
	codec string

	h264RTP *rtph264.Decoder
	h265RTP *rtph265.Decoder
	jpegRTP *rtpmjpeg.Decoder
	av      *h264.Decoder

	// params are the parameter sets from the SDP, handed to the decoder in
	// front of the first random-access unit when the stream itself omits them.
	params      [][]byte
	gotKeyframe bool
	withParams  [][]byte
}

// errNoPicture means a packet was consumed without completing a picture.
var errNoPicture = errors.New("no picture yet")

// newVideoPipeline picks the first supported video format of the session
// (H.264, then H.265, then M-JPEG) among formats.
func newVideoPipeline(forma format.Format) (*videoPipeline, error) {
	p := &videoPipeline{}
	var err error
	switch f := forma.(type) {
	case *format.H264:
		p.codec = "H264"
		if p.h264RTP, err = f.CreateDecoder(); err != nil {
			return nil, fmt.Errorf("h264 rtp decoder: %w", err)
		}
		if p.av, err = h264.NewDecoder(h264.H264); err != nil {
			return nil, err
		}
		sps, pps := f.SafeParams()
		p.params = nonEmpty(sps, pps)
	case *format.H265:
		p.codec = "H265"
		if p.h265RTP, err = f.CreateDecoder(); err != nil {
			return nil, fmt.Errorf("h265 rtp decoder: %w", err)
		}
		if p.av, err = h264.NewDecoder(h264.H265); err != nil {
			return nil, err
		}
		p.params = nonEmpty(f.VPS, f.SPS, f.PPS)
	case *format.MJPEG:
		p.codec = "MJPEG"
		if p.jpegRTP, err = f.CreateDecoder(); err != nil {
			return nil, fmt.Errorf("mjpeg rtp decoder: %w", err)
		}
	default:
		return nil, fmt.Errorf("unsupported video format %s", forma.Codec())
	}
	return p, nil
}

func nonEmpty(bs ...[]byte) [][]byte {
	var out [][]byte
	for _, b := range bs {
		if len(b) > 0 {
			out = append(out, b)
		}
	}
	return out
}

func (p *videoPipeline) close() {
	if p.av != nil {
		p.av.Close()
		p.av = nil
	}
}

// push consumes one RTP packet. When it completes a picture, the picture is
// written into dst (grown if needed) and returned with its size; otherwise
// the error is errNoPicture (normal) or a depacketization / decode error
// (corrupt input; the pipeline stays usable).
func (p *videoPipeline) push(pkt *rtp.Packet, dst []uint8) ([]uint8, int, int, error) {
	switch {
	case p.jpegRTP != nil:
		img, err := p.jpegRTP.Decode(pkt)
		if err != nil {
			if errors.Is(err, rtpmjpeg.ErrMorePacketsNeeded) || errors.Is(err, rtpmjpeg.ErrNonStartingPacketAndNoPrevious) {
				return dst, 0, 0, errNoPicture
			}
			return dst, 0, 0, fmt.Errorf("rtp/jpeg: %w", err)
		}
		return DecodeJPEG(img, dst)
	case p.h264RTP != nil:
		au, err := p.h264RTP.Decode(pkt)
		if err != nil {
			if errors.Is(err, rtph264.ErrMorePacketsNeeded) || errors.Is(err, rtph264.ErrNonStartingPacketAndNoPrevious) {
				return dst, 0, 0, errNoPicture
			}
			return dst, 0, 0, fmt.Errorf("rtp/h264: %w", err)
		}
		return p.decodeAU(au, mch264.IsRandomAccess(au), dst)
	case p.h265RTP != nil:
		au, err := p.h265RTP.Decode(pkt)
		if err != nil {
			if errors.Is(err, rtph265.ErrMorePacketsNeeded) || errors.Is(err, rtph265.ErrNonStartingPacketAndNoPrevious) {
				return dst, 0, 0, errNoPicture
			}
			return dst, 0, 0, fmt.Errorf("rtp/h265: %w", err)
		}
		return p.decodeAU(au, mch265.IsRandomAccess(au), dst)
	}
	return dst, 0, 0, errors.New("pipeline is closed")
}

// decodeAU drops everything before the first random-access unit (a decoder
// fed P-frames without their reference only produces garbage), then decodes.
func (p *videoPipeline) decodeAU(au [][]byte, randomAccess bool, dst []uint8) ([]uint8, int, int, error) {
	if !p.gotKeyframe {
		if !randomAccess {
			return dst, 0, 0, errNoPicture
		}
		p.gotKeyframe = true
		if len(p.params) > 0 {
			// Prepend the SDP parameter sets; a repeated SPS/PPS is harmless
			// and in-band ones that follow still override them.
			p.withParams = append(append(p.withParams[:0], p.params...), au...)
			au = p.withParams
		}
	}
	out, w, h, ok, err := p.av.Decode(au, dst)
	if err != nil {
		return out, 0, 0, err
	}
	if !ok {
		return out, 0, 0, errNoPicture
	}
	return out, w, h, nil
}
