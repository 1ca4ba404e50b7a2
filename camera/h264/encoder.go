//go:build !nolibav

package h264

/*
#cgo pkg-config: libavcodec libavutil libswscale
#include <libavcodec/avcodec.h>
#include <libavutil/opt.h>
#include <stdlib.h>
#include <libavutil/frame.h>
#include <libswscale/swscale.h>

static int from_rgb24(struct SwsContext *sws, const uint8_t *src, int stride, int h, AVFrame *f) {
	const uint8_t *s[4] = {src, NULL, NULL, NULL};
	int st[4] = {stride, 0, 0, 0};
	return sws_scale(sws, s, st, 0, h, f->data, f->linesize);
}

static int open_x264(AVCodecContext **out, const AVCodec *codec, int w, int h, int fps_num, int fps_den, int gop, int bitrate) {
	AVCodecContext *c = avcodec_alloc_context3(codec);
	if (c == NULL) return AVERROR(ENOMEM);
	c->width = w;
	c->height = h;
	c->pix_fmt = AV_PIX_FMT_YUV420P;
	c->time_base = (AVRational){fps_den, fps_num};
	c->framerate = (AVRational){fps_num, fps_den};
	c->gop_size = gop;
	c->max_b_frames = 0;
	c->bit_rate = bitrate;
	c->thread_count = 1;
	av_opt_set(c->priv_data, "preset", "ultrafast", 0);
	av_opt_set(c->priv_data, "tune", "zerolatency", 0);
	int r = avcodec_open2(c, codec, NULL);
	if (r < 0) { avcodec_free_context(&c); return r; }
	*out = c;
	return 0;
}

static int eagain(void) { return AVERROR(EAGAIN); }
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Encoder turns RGB24 pictures into H.264 access units with libavcodec's
// libx264 (preset ultrafast, tune zerolatency: no B-frames, no lookahead,
// one access unit out per picture in). SPS and PPS precede every IDR picture.
// It is not safe for concurrent use.
type Encoder struct {
	cfg   EncoderConfig
	ctx   *C.AVCodecContext
	frame *C.AVFrame
	pkt   *C.AVPacket
	sws   *C.struct_SwsContext
	pts   int64
}

// NewEncoder opens libx264; it fails when libavcodec was built without it.
func NewEncoder(cfg EncoderConfig) (*Encoder, error) {
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width%2 != 0 || cfg.Height%2 != 0 {
		return nil, fmt.Errorf("h264 encoder: size %dx%d must be positive and even", cfg.Width, cfg.Height)
	}
	if cfg.FPS <= 0 {
		return nil, fmt.Errorf("h264 encoder: fps %d must be positive", cfg.FPS)
	}
	if cfg.GOP <= 0 {
		cfg.GOP = cfg.FPS
	}
	if cfg.Bitrate <= 0 {
		cfg.Bitrate = 2_000_000
	}
	C.av_log_set_level(C.AV_LOG_FATAL)
	name := C.CString("libx264")
	codec := C.avcodec_find_encoder_by_name(name)
	C.free(unsafe.Pointer(name))
	if codec == nil {
		return nil, errors.New("h264 encoder: libavcodec has no libx264")
	}
	e := &Encoder{cfg: cfg}
	if r := C.open_x264(&e.ctx, codec, C.int(cfg.Width), C.int(cfg.Height), C.int(cfg.FPS), 1, C.int(cfg.GOP), C.int(cfg.Bitrate)); r < 0 {
		return nil, fmt.Errorf("h264 encoder: open libx264: %w", averr(r))
	}
	e.frame = C.av_frame_alloc()
	e.pkt = C.av_packet_alloc()
	if e.frame == nil || e.pkt == nil {
		e.Close()
		return nil, errors.New("h264 encoder: av_frame_alloc/av_packet_alloc failed")
	}
	e.frame.format = C.AV_PIX_FMT_YUV420P
	e.frame.width = C.int(cfg.Width)
	e.frame.height = C.int(cfg.Height)
	if r := C.av_frame_get_buffer(e.frame, 0); r < 0 {
		e.Close()
		return nil, fmt.Errorf("h264 encoder: frame buffer: %w", averr(r))
	}
	e.sws = C.sws_getContext(C.int(cfg.Width), C.int(cfg.Height), C.AV_PIX_FMT_RGB24,
		C.int(cfg.Width), C.int(cfg.Height), C.AV_PIX_FMT_YUV420P, C.SWS_BILINEAR|C.SWS_ACCURATE_RND, nil, nil, nil)
	if e.sws == nil {
		e.Close()
		return nil, errors.New("h264 encoder: no RGB24 to YUV420P conversion")
	}
	return e, nil
}

// Close releases the C resources.
func (e *Encoder) Close() {
	if e.sws != nil {
		C.sws_freeContext(e.sws)
		e.sws = nil
	}
	if e.frame != nil {
		C.av_frame_free(&e.frame)
	}
	if e.pkt != nil {
		C.av_packet_free(&e.pkt)
	}
	if e.ctx != nil {
		C.avcodec_free_context(&e.ctx)
	}
}

// Encode compresses one RGB24 picture (len Width*Height*3) and appends the
// resulting Annex-B access unit to dst[:0]. An empty result means the
// encoder buffered the picture (it does not with the zerolatency tune).
func (e *Encoder) Encode(rgb []uint8, dst []byte) ([]byte, error) {
	dst = dst[:0]
	if len(rgb) != e.cfg.Width*e.cfg.Height*3 {
		return dst, fmt.Errorf("h264 encoder: got %d bytes, want %dx%dx3", len(rgb), e.cfg.Width, e.cfg.Height)
	}
	if r := C.av_frame_make_writable(e.frame); r < 0 {
		return dst, fmt.Errorf("h264 encoder: %w", averr(r))
	}
	if r := C.from_rgb24(e.sws, (*C.uint8_t)(unsafe.Pointer(&rgb[0])), C.int(e.cfg.Width*3), C.int(e.cfg.Height), e.frame); r < 0 {
		return dst, fmt.Errorf("h264 encoder: sws_scale: %w", averr(r))
	}
	e.frame.pts = C.int64_t(e.pts)
	e.pts++
	if r := C.avcodec_send_frame(e.ctx, e.frame); r < 0 {
		return dst, fmt.Errorf("h264 encoder: send frame: %w", averr(r))
	}
	for {
		r := C.avcodec_receive_packet(e.ctx, e.pkt)
		if r == C.eagain() {
			return dst, nil
		}
		if r < 0 {
			return dst, fmt.Errorf("h264 encoder: receive packet: %w", averr(r))
		}
		dst = append(dst, unsafe.Slice((*byte)(unsafe.Pointer(e.pkt.data)), int(e.pkt.size))...)
		C.av_packet_unref(e.pkt)
	}
}
