//go:build !nolibav

package h264

/*
#cgo pkg-config: libavcodec libavutil libswscale
#include <libavcodec/avcodec.h>
#include <libavutil/imgutils.h>
#include <libavutil/log.h>
#include <libavutil/pixfmt.h>
#include <libswscale/swscale.h>

// to_rgb24 converts a decoded picture into a caller-owned RGB24 buffer; the
// destination pointer array lives on the C stack so Go memory never holds C
// pointers and C never keeps the Go pointer.
static int to_rgb24(struct SwsContext *sws, const AVFrame *f, uint8_t *dst, int stride) {
	uint8_t *d[4] = {dst, NULL, NULL, NULL};
	int s[4] = {stride, 0, 0, 0};
	return sws_scale(sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, d, s);
}

// unjpeg maps the deprecated full-range "J" formats onto their plain twins;
// the range goes to sws_setColorspaceDetails instead.
static enum AVPixelFormat unjpeg(enum AVPixelFormat f, int *full) {
	switch (f) {
	case AV_PIX_FMT_YUVJ420P: *full = 1; return AV_PIX_FMT_YUV420P;
	case AV_PIX_FMT_YUVJ422P: *full = 1; return AV_PIX_FMT_YUV422P;
	case AV_PIX_FMT_YUVJ444P: *full = 1; return AV_PIX_FMT_YUV444P;
	case AV_PIX_FMT_YUVJ440P: *full = 1; return AV_PIX_FMT_YUV440P;
	default: return f;
	}
}

static struct SwsContext *rgb_context(struct SwsContext *old, const AVFrame *f) {
	int full = f->color_range == AVCOL_RANGE_JPEG;
	enum AVPixelFormat src = unjpeg((enum AVPixelFormat)f->format, &full);
	struct SwsContext *c = sws_getCachedContext(old, f->width, f->height, src,
		f->width, f->height, AV_PIX_FMT_RGB24, SWS_BILINEAR | SWS_ACCURATE_RND, NULL, NULL, NULL);
	if (c == NULL) return NULL;
	int cs = f->colorspace == AVCOL_SPC_BT709 ? SWS_CS_ITU709 : SWS_CS_ITU601;
	const int *coef = sws_getCoefficients(cs);
	sws_setColorspaceDetails(c, coef, full, sws_getCoefficients(SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16);
	return c;
}

static void set_low_delay(AVCodecContext *c) {
	c->flags |= AV_CODEC_FLAG_LOW_DELAY;
	c->thread_type = FF_THREAD_SLICE; // frame threads would delay every frame
	c->thread_count = 0;
}

static int err_eagain(void) { return AVERROR(EAGAIN); }
static int err_eof(void) { return AVERROR_EOF; }
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Decoder turns access units into RGB24 pictures. It is not safe for
// concurrent use.
type Decoder struct {
	codec  Codec
	ctx    *C.AVCodecContext
	frame  *C.AVFrame
	pkt    *C.AVPacket
	buf    *C.uint8_t // Annex-B packet data, padded as libavcodec requires
	bufCap int
	sws    *C.struct_SwsContext
	swsW   C.int
	swsH   C.int
	swsFmt C.int
	swsCS  C.int
	swsRng C.int
}

// NewDecoder opens a libavcodec decoder for codec.
func NewDecoder(codec Codec) (*Decoder, error) {
	id := uint32(C.AV_CODEC_ID_H264)
	if codec == H265 {
		id = uint32(C.AV_CODEC_ID_HEVC)
	}
	// libav's logger is process-wide; corrupt input from a camera must not
	// flood stderr, errors come back through the return values instead.
	C.av_log_set_level(C.AV_LOG_FATAL)
	dec := C.avcodec_find_decoder(id)
	if dec == nil {
		return nil, fmt.Errorf("libavcodec has no %v decoder", codec)
	}
	d := &Decoder{codec: codec}
	d.ctx = C.avcodec_alloc_context3(dec)
	if d.ctx == nil {
		return nil, errors.New("avcodec_alloc_context3 failed")
	}
	C.set_low_delay(d.ctx)
	if res := C.avcodec_open2(d.ctx, dec, nil); res < 0 {
		C.avcodec_free_context(&d.ctx)
		return nil, fmt.Errorf("open %v decoder: %w", codec, averr(res))
	}
	d.frame = C.av_frame_alloc()
	d.pkt = C.av_packet_alloc()
	if d.frame == nil || d.pkt == nil {
		d.Close()
		return nil, errors.New("av_frame_alloc/av_packet_alloc failed")
	}
	return d, nil
}

// Codec returns the codec the decoder was opened for.
func (d *Decoder) Codec() Codec { return d.codec }

// Close releases the C resources. The Decoder must not be used afterwards.
func (d *Decoder) Close() {
	if d.sws != nil {
		C.sws_freeContext(d.sws)
		d.sws = nil
	}
	if d.frame != nil {
		C.av_frame_free(&d.frame)
	}
	if d.pkt != nil {
		C.av_packet_free(&d.pkt)
	}
	if d.buf != nil {
		C.av_free(unsafe.Pointer(d.buf))
		d.buf = nil
	}
	if d.ctx != nil {
		C.avcodec_free_context(&d.ctx)
	}
}

// Decode feeds one access unit (NAL units without start codes) to the
// decoder. When a picture comes out it is converted into dst (grown if too
// small) and returned with its size and ok = true. ok = false with a nil error
// means the decoder needs more data (for example a stream that has not yet
// sent SPS/PPS). A non-nil error reports a corrupt access unit; the decoder
// stays usable.
func (d *Decoder) Decode(au [][]byte, dst []uint8) (out []uint8, width, height int, ok bool, err error) {
	n := AnnexBSize(au)
	if n == 0 {
		return dst, 0, 0, false, nil
	}
	if err := d.reserve(n); err != nil {
		return dst, 0, 0, false, err
	}
	cbuf := unsafe.Slice((*byte)(unsafe.Pointer(d.buf)), d.bufCap)
	AppendAnnexB(cbuf[:0], au)
	clear(cbuf[n:])
	d.pkt.data = d.buf
	d.pkt.size = C.int(n)
	res := C.avcodec_send_packet(d.ctx, d.pkt)
	d.pkt.data = nil
	d.pkt.size = 0
	if res < 0 && res != C.err_eagain() {
		return dst, 0, 0, false, fmt.Errorf("decode %v access unit of %d bytes: %w", d.codec, n, averr(res))
	}
	got := false
	for {
		res = C.avcodec_receive_frame(d.ctx, d.frame)
		if res == C.err_eagain() || res == C.err_eof() {
			break
		}
		if res < 0 {
			return dst, 0, 0, false, fmt.Errorf("receive %v frame: %w", d.codec, averr(res))
		}
		got = true
		dst, width, height, err = d.convert(dst)
		if err != nil {
			return dst, 0, 0, false, err
		}
	}
	return dst, width, height, got, nil
}

func (d *Decoder) reserve(n int) error {
	need := n + C.AV_INPUT_BUFFER_PADDING_SIZE
	if need <= d.bufCap {
		return nil
	}
	capacity := max(need, 2*d.bufCap)
	p := (*C.uint8_t)(C.av_malloc(C.size_t(capacity)))
	if p == nil {
		return fmt.Errorf("allocate %d-byte packet buffer", capacity)
	}
	if d.buf != nil {
		C.av_free(unsafe.Pointer(d.buf))
	}
	d.buf, d.bufCap = p, capacity
	return nil
}

func (d *Decoder) convert(dst []uint8) ([]uint8, int, int, error) {
	f := d.frame
	w, h := int(f.width), int(f.height)
	if w <= 0 || h <= 0 {
		return dst, 0, 0, fmt.Errorf("decoder returned a %dx%d picture", w, h)
	}
	if d.sws == nil || f.width != d.swsW || f.height != d.swsH || f.format != d.swsFmt ||
		C.int(f.colorspace) != d.swsCS || C.int(f.color_range) != d.swsRng {
		s := C.rgb_context(d.sws, f)
		if s == nil {
			return dst, 0, 0, fmt.Errorf("no colour conversion from pixel format %d at %dx%d", int(f.format), w, h)
		}
		d.sws, d.swsW, d.swsH, d.swsFmt = s, f.width, f.height, f.format
		d.swsCS, d.swsRng = C.int(f.colorspace), C.int(f.color_range)
	}
	n := w * h * 3
	if cap(dst) < n {
		dst = make([]uint8, n)
	}
	dst = dst[:n]
	if res := C.to_rgb24(d.sws, f, (*C.uint8_t)(unsafe.Pointer(&dst[0])), C.int(w*3)); res < 0 {
		return dst, 0, 0, fmt.Errorf("sws_scale: %w", averr(res))
	}
	return dst, w, h, nil
}

// averr converts a negative libav return code into an error with its text.
func averr(code C.int) error {
	var buf [128]C.char
	C.av_strerror(code, &buf[0], C.size_t(len(buf)))
	return fmt.Errorf("libav error %d: %s", int(code), C.GoString(&buf[0]))
}
