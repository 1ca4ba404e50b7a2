package mcaprec

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/x448/float16"

	"github.com/didoedge/didoedge/pkg/mapgrid"
)

// Float16Encoding is the RawImage encoding of maps recorded in half
// precision: 16 bits per pixel, little-endian, holding IEEE 754 binary16
// values (the channel's value_encoding says so). Foxglove shows the
// channel as a 16UC1 image; binary16 bit patterns of non-negative values
// increase with the value, so its picture is a monotone (log-like) ramp.
const Float16Encoding = "16UC1"

// Values of the map channels' metadata keys.
const (
	// ResolutionComputed: the map is on the grid it was computed on (a
	// model's output grid over its input), to be resampled to the frame.
	ResolutionComputed = "computed"
	// ResolutionFrame: the map is at the frame's size.
	ResolutionFrame = "frame"

	// ValueFloat16: 16UC1 messages hold binary16 values (relative error at
	// most 2^-11 for |v| in [6.1e-5, 65504]); a message whose values do not
	// fit binary16's range is written as exact 32FC1 instead.
	ValueFloat16 = "float16"
	// ValueFloat32: 32FC1 messages, float32 rounded to MantissaBitsKey's
	// mantissa bits.
	ValueFloat32 = "float32"

	// ResizeRule is how a map's grid comes back to the frame; mapgrid.Remap
	// implements it.
	ResizeRule = "bilinear, pixel centres aligned, clamped: frame pixel x -> input u = x0 + (x+0.5) cw/frame_w - 0.5 " +
		"-> map column s = (u+0.5) map_w/input_w - 0.5, clamped to [0, map_w-1]; rows alike"
)

// Metadata keys of a map channel (beside camera, unit and meaning).
const (
	ResolutionKey    = "resolution"
	FrameSizeKey     = "frame_size"   // "WxH" of the camera frame
	InputSizeKey     = "input_size"   // "WxH" of the model input the map covers
	ContentRectKey   = "content_rect" // "x0,y0,cw,ch": the frame's rectangle in the input
	ResizeKey        = "resize"       // ResizeRule
	ValueEncodingKey = "value_encoding"
	MantissaBitsKey  = "mantissa_bits" // float32 channels: precision kept
)

// MapChannel is what a map channel's metadata says about its messages.
type MapChannel struct {
	// Resolution is ResolutionComputed or ResolutionFrame.
	Resolution string
	// Grid places the frame in the input the map covers (computed
	// resolution); the zero Grid for frame-size maps.
	Grid mapgrid.Geometry
	// Value is ValueFloat16 or ValueFloat32.
	Value string
	// MantissaBits is the float32 precision kept (23: exact).
	MantissaBits int
}

// Metadata returns the channel metadata describing c, to be merged with
// the channel's camera, unit and meaning.
func (c MapChannel) Metadata() map[string]string {
	md := map[string]string{ResolutionKey: c.Resolution, ValueEncodingKey: c.Value}
	if c.Value == ValueFloat32 {
		md[MantissaBitsKey] = strconv.Itoa(c.MantissaBits)
	}
	if c.Resolution == ResolutionComputed {
		g := c.Grid
		md[FrameSizeKey] = fmt.Sprintf("%dx%d", g.FrameW, g.FrameH)
		md[InputSizeKey] = fmt.Sprintf("%dx%d", g.InW, g.InH)
		md[ContentRectKey] = fmt.Sprintf("%d,%d,%d,%d", g.X0, g.Y0, g.CW, g.CH)
		md[ResizeKey] = ResizeRule
	}
	return md
}

// ParseMapChannel reads a map channel's metadata. Channels of recordings
// made before maps had a resolution (no resolution key) are frame-size
// float32 maps.
func ParseMapChannel(md map[string]string) (MapChannel, error) {
	c := MapChannel{Resolution: md[ResolutionKey], Value: md[ValueEncodingKey], MantissaBits: 23}
	if c.Resolution == "" {
		c.Resolution = ResolutionFrame
	}
	if c.Value == "" {
		c.Value = ValueFloat32
	}
	switch c.Value {
	case ValueFloat16, ValueFloat32:
	default:
		return c, fmt.Errorf("channel metadata %s: %q is not %s or %s", ValueEncodingKey, c.Value, ValueFloat16, ValueFloat32)
	}
	if s, ok := md[MantissaBitsKey]; ok && c.Value == ValueFloat32 {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 23 {
			return c, fmt.Errorf("channel metadata %s: %q is not in [1, 23]", MantissaBitsKey, s)
		}
		c.MantissaBits = n
	}
	switch c.Resolution {
	case ResolutionFrame:
		return c, nil
	case ResolutionComputed:
	default:
		return c, fmt.Errorf("channel metadata %s: %q is not %s or %s", ResolutionKey, c.Resolution, ResolutionComputed, ResolutionFrame)
	}
	if rule := md[ResizeKey]; rule != ResizeRule {
		return c, fmt.Errorf("channel metadata %s: %q is not the rule this build resamples with (%q)", ResizeKey, rule, ResizeRule)
	}
	g := &c.Grid
	if err := parseInts(md, FrameSizeKey, "x", &g.FrameW, &g.FrameH); err != nil {
		return c, err
	}
	if err := parseInts(md, InputSizeKey, "x", &g.InW, &g.InH); err != nil {
		return c, err
	}
	if err := parseInts(md, ContentRectKey, ",", &g.X0, &g.Y0, &g.CW, &g.CH); err != nil {
		return c, err
	}
	if g.FrameW < 1 || g.FrameH < 1 || g.InW < 1 || g.InH < 1 || g.CW < 1 || g.CH < 1 ||
		g.X0 < 0 || g.Y0 < 0 || g.X0+g.CW > g.InW || g.Y0+g.CH > g.InH || g.FrameW*g.FrameH > maxFramePixels {
		return c, fmt.Errorf("channel metadata: frame %dx%d in input %dx%d at %d,%d,%d,%d is not a valid placement",
			g.FrameW, g.FrameH, g.InW, g.InH, g.X0, g.Y0, g.CW, g.CH)
	}
	return c, nil
}

// maxFramePixels bounds the frame a map is rebuilt at (8K UHD is 2^25),
// so that damaged metadata cannot ask for gigabytes.
const maxFramePixels = 1 << 26

// parseInts reads the key's value as len(dst) positive integers joined by
// sep.
func parseInts(md map[string]string, key, sep string, dst ...*int) error {
	parts := strings.Split(md[key], sep)
	if len(parts) != len(dst) {
		return fmt.Errorf("channel metadata %s: %q, want %d integers joined by %q", key, md[key], len(dst), sep)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 1<<20 {
			return fmt.Errorf("channel metadata %s: %q, want %d integers joined by %q", key, md[key], len(dst), sep)
		}
		*dst[i] = n
	}
	return nil
}

// Decode returns the values of one of the channel's messages (row-major,
// the message's width x height), reusing dst.
func (c MapChannel) Decode(m RawImage, dst []float32) ([]float32, error) {
	if m.Encoding == Float16Encoding && c.Value == ValueFloat16 {
		return m.halfs(dst)
	}
	return m.Float32s(dst)
}

// FrameMap resamples values, a map of w x h decoded from the channel, to
// the frame (mapgrid.Remap with the channel's grid) into dst; frame-size
// maps are copied. It returns the frame-size map and its size.
func (c MapChannel) FrameMap(values []float32, w, h int, dst []float32) (out []float32, fw, fh int, err error) {
	if len(values) != w*h {
		return dst, 0, 0, fmt.Errorf("map of %d values is not %dx%d", len(values), w, h)
	}
	fw, fh = w, h
	if c.Resolution == ResolutionComputed {
		fw, fh = c.Grid.FrameW, c.Grid.FrameH
	}
	if cap(dst) < fw*fh {
		dst = make([]float32, fw*fh)
	}
	dst = dst[:fw*fh]
	if c.Resolution != ResolutionComputed {
		copy(dst, values)
		return dst, fw, fh, nil
	}
	if err := mapgrid.NewRemap(c.Grid, w, h).Apply(values, dst); err != nil {
		return dst, 0, 0, err
	}
	return dst, fw, fh, nil
}

// AppendRawImage16F appends a foxglove.RawImage of Float16Encoding holding
// the row-major width x height map px as binary16 (rounded to nearest,
// ties to even: relative error at most 2^-11 in binary16's normal range,
// absolute error at most 2^-25 below it). ok is false, and dst unchanged,
// when a finite value lies beyond binary16's range (|v| >= 65520): the
// caller records that map in float32.
func AppendRawImage16F(dst []byte, t time.Time, frameID string, width, height int, px []float32) (_ []byte, ok bool) {
	start := len(dst)
	dst, out := appendRawImageHeader(dst, t, frameID, width, height, Float16Encoding, 2, len(px))
	for i, v := range px {
		h, ok := toHalf(math.Float32bits(v))
		if !ok {
			return dst[:start], false
		}
		binary.LittleEndian.PutUint16(out[2*i:], h)
	}
	return dst, true
}

// toHalf rounds float32 bits to binary16, to nearest with ties to even;
// ok is false for a finite value that rounds beyond binary16's largest
// (65504). Values whose result is a normal binary16 take the fast path,
// the rest (subnormal results, zeros, Inf, NaN) x448/float16's full
// conversion. The fast path rebiases the exponent by 127-15 = 112 and
// rounds at mantissa bit 13: adding 0xfff plus the kept part's lowest bit
// carries into bit 13 exactly when the dropped 13 bits exceed half an ulp,
// or equal it with an odd kept part (ties to even); a carry out of the
// mantissa increments the exponent, which is the correct rounding up to
// the next binade, and up to 0x7c00 (Inf) past 65504.
func toHalf(b uint32) (uint16, bool) {
	sign := uint16(b>>16) & 0x8000
	a := b & 0x7fffffff
	if a >= 0x38800000 && a < 0x47800000 { // 2^-14 <= |v| < 2^16
		a = a - 112<<23 + 0xfff + (a>>13)&1
		h := uint16(a >> 13)
		return sign | h, h < 0x7c00
	}
	if a >= 0x47800000 && a < 0x7f800000 { // finite, |v| >= 2^16
		return 0, false
	}
	return uint16(float16.Fromfloat32(math.Float32frombits(b))), true
}

// halfs decodes a Float16Encoding image into dst (grown when short).
func (m RawImage) halfs(dst []float32) ([]float32, error) {
	w, h, err := m.size(2)
	if err != nil {
		return dst, err
	}
	if cap(dst) < w*h {
		dst = make([]float32, w*h)
	}
	dst = dst[:w*h]
	for y := range h {
		row := m.Data[y*int(m.Step):]
		for x := range w {
			dst[y*w+x] = float16.Frombits(binary.LittleEndian.Uint16(row[2*x:])).Float32()
		}
	}
	return dst, nil
}
