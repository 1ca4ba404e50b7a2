package mcaprec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Encodings of RawImage data used by recordings.
const (
	// Float32Encoding is one little-endian IEEE 754 float32 per pixel.
	Float32Encoding = "32FC1"
)

// appendTimestamp appends a google.protobuf.Timestamp field.
func appendTimestamp(b []byte, num protowire.Number, t time.Time) []byte {
	sec, nsec := t.Unix(), int64(t.Nanosecond())
	n := protowire.SizeTag(1) + protowire.SizeVarint(uint64(sec)) + protowire.SizeTag(2) + protowire.SizeVarint(uint64(nsec))
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(sec))
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(nsec))
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendFixed32(b []byte, num protowire.Number, v uint32) []byte {
	b = protowire.AppendTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, v)
}

// appendDoubles appends a packed repeated double field.
func appendDoubles(b []byte, num protowire.Number, v []float64) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(8*len(v)))
	for _, x := range v {
		b = protowire.AppendFixed64(b, math.Float64bits(x))
	}
	return b
}

// AppendCompressedImage appends a foxglove.CompressedImage to dst.
// format is "jpeg" or "png".
func AppendCompressedImage(dst []byte, t time.Time, frameID, format string, data []byte) []byte {
	dst = appendTimestamp(dst, 1, t)
	dst = appendString(dst, 4, frameID)
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendBytes(dst, data)
	return appendString(dst, 3, format)
}

// AppendRawImage32F appends a foxglove.RawImage of encoding 32FC1 holding
// the row-major width x height map px (little-endian float32, step 4w).
// mantissaBits (1..23) is the precision kept: each finite value is rounded
// to that many mantissa bits (relative error at most 2^-(mantissaBits+1)),
// so that the zeroed low bits compress; 23 keeps the values exact. It
// allocates nothing when dst has room.
func AppendRawImage32F(dst []byte, t time.Time, frameID string, width, height int, px []float32, mantissaBits int) []byte {
	dst, out := appendRawImageHeader(dst, t, frameID, width, height, Float32Encoding, 4, len(px))
	drop := uint(23 - min(23, max(1, mantissaBits)))
	if drop == 0 {
		for i, v := range px {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
		return dst
	}
	half, mask := uint32(1)<<(drop-1), uint32(1)<<drop-1
	for i, v := range px {
		b := math.Float32bits(v)
		if b&0x7f800000 != 0x7f800000 { // finite: round half up on the magnitude
			b = (b + half) &^ mask
		}
		binary.LittleEndian.PutUint32(out[4*i:], b)
	}
	return dst
}

// appendRawImageHeader appends a foxglove.RawImage's fields up to its data
// (timestamp, frame id, size, encoding, step of bytesPerPixel-byte
// pixels) and room for n pixels, which it returns as out for the caller
// to fill.
func appendRawImageHeader(dst []byte, t time.Time, frameID string, width, height int, encoding string, bytesPerPixel, n int) (_, out []byte) {
	dst = appendTimestamp(dst, 1, t)
	dst = appendString(dst, 7, frameID)
	dst = appendFixed32(dst, 2, uint32(width))
	dst = appendFixed32(dst, 3, uint32(height))
	dst = appendString(dst, 4, encoding)
	dst = appendFixed32(dst, 5, uint32(bytesPerPixel*width))
	dst = protowire.AppendTag(dst, 6, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(bytesPerPixel*n))
	start := len(dst)
	dst = growLen(dst, bytesPerPixel*n)
	return dst, dst[start:]
}

// growLen extends b by n bytes, reallocating only when its capacity is short.
func growLen(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n, 2*(len(b)+n))
	copy(nb, b)
	return nb
}

// Intrinsics are pinhole intrinsics in pixels of a width x height image.
type Intrinsics struct {
	Width, Height  int
	Fx, Fy, Cx, Cy float64
}

// AppendCameraCalibration appends a foxglove.CameraCalibration of an
// undistorted pinhole camera: K = [fx 0 cx; 0 fy cy; 0 0 1], R = I,
// P = [K | 0], distortion model plumb_bob with zero coefficients.
func AppendCameraCalibration(dst []byte, t time.Time, frameID string, in Intrinsics) []byte {
	dst = appendTimestamp(dst, 1, t)
	dst = appendString(dst, 9, frameID)
	dst = appendFixed32(dst, 2, uint32(in.Width))
	dst = appendFixed32(dst, 3, uint32(in.Height))
	dst = appendString(dst, 4, "plumb_bob")
	dst = appendDoubles(dst, 5, []float64{0, 0, 0, 0, 0})
	dst = appendDoubles(dst, 6, []float64{in.Fx, 0, in.Cx, 0, in.Fy, in.Cy, 0, 0, 1})
	dst = appendDoubles(dst, 7, []float64{1, 0, 0, 0, 1, 0, 0, 0, 1})
	return appendDoubles(dst, 8, []float64{in.Fx, 0, in.Cx, 0, 0, in.Fy, in.Cy, 0, 0, 0, 1, 0})
}

// CompressedImage is a decoded foxglove.CompressedImage; Data aliases the
// message bytes.
type CompressedImage struct {
	Time    time.Time
	FrameID string
	Format  string
	Data    []byte
}

// RawImage is a decoded foxglove.RawImage; Data aliases the message bytes.
type RawImage struct {
	Time                time.Time
	FrameID, Encoding   string
	Width, Height, Step uint32
	Data                []byte
}

// CameraCalibration is a decoded foxglove.CameraCalibration.
type CameraCalibration struct {
	Time            time.Time
	FrameID         string
	Width, Height   uint32
	DistortionModel string
	D, K, R, P      []float64
}

// Intrinsics returns fx, fy, cx, cy from K.
func (c CameraCalibration) Intrinsics() (Intrinsics, error) {
	if len(c.K) != 9 {
		return Intrinsics{}, fmt.Errorf("camera calibration: K has %d values, want 9", len(c.K))
	}
	return Intrinsics{Width: int(c.Width), Height: int(c.Height), Fx: c.K[0], Fy: c.K[4], Cx: c.K[2], Cy: c.K[5]}, nil
}

// errTruncated is returned for a message cut inside a field.
var errTruncated = errors.New("truncated protobuf message")

// walk calls fn for each field of a protobuf message; fn gets the raw value
// bytes (the payload of length-delimited fields, the 4 or 8 bytes of fixed
// fields, the varint's bytes for varints).
func walk(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("field tag: %w", protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		switch typ {
		case protowire.BytesType:
			payload, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return fmt.Errorf("field %d: %w", num, protowire.ParseError(m))
			}
			v, n = payload, m
		default:
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return fmt.Errorf("field %d: %w", num, protowire.ParseError(m))
			}
			v, n = b[:m], m
		}
		if err := fn(num, typ, v); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func want(num protowire.Number, typ, wantTyp protowire.Type) error {
	if typ != wantTyp {
		return fmt.Errorf("field %d has wire type %d, want %d", num, typ, wantTyp)
	}
	return nil
}

func parseTimestamp(v []byte) (time.Time, error) {
	var sec, nsec uint64
	err := walk(v, func(num protowire.Number, typ protowire.Type, f []byte) error {
		if num != 1 && num != 2 {
			return nil
		}
		if err := want(num, typ, protowire.VarintType); err != nil {
			return fmt.Errorf("timestamp: %w", err)
		}
		x, _ := protowire.ConsumeVarint(f)
		if num == 1 {
			sec = x
		} else {
			nsec = x
		}
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	if nsec >= 1e9 {
		return time.Time{}, fmt.Errorf("timestamp: nanos %d out of range", nsec)
	}
	return time.Unix(int64(sec), int64(nsec)), nil
}

func fixed32(num protowire.Number, typ protowire.Type, v []byte) (uint32, error) {
	if err := want(num, typ, protowire.Fixed32Type); err != nil {
		return 0, err
	}
	x, _ := protowire.ConsumeFixed32(v)
	return x, nil
}

// ParseCompressedImage decodes a foxglove.CompressedImage.
func ParseCompressedImage(b []byte) (CompressedImage, error) {
	var m CompressedImage
	err := walk(b, func(num protowire.Number, typ protowire.Type, v []byte) (err error) {
		switch num {
		case 1:
			if err = want(num, typ, protowire.BytesType); err == nil {
				m.Time, err = parseTimestamp(v)
			}
		case 2:
			if err = want(num, typ, protowire.BytesType); err == nil {
				m.Data = v
			}
		case 3:
			if err = want(num, typ, protowire.BytesType); err == nil {
				m.Format = string(v)
			}
		case 4:
			if err = want(num, typ, protowire.BytesType); err == nil {
				m.FrameID = string(v)
			}
		}
		return err
	})
	if err != nil {
		return m, fmt.Errorf("foxglove.CompressedImage: %w", err)
	}
	return m, nil
}

// ParseRawImage decodes a foxglove.RawImage.
func ParseRawImage(b []byte) (RawImage, error) {
	var m RawImage
	err := walk(b, func(num protowire.Number, typ protowire.Type, v []byte) (err error) {
		switch num {
		case 1:
			if err = want(num, typ, protowire.BytesType); err == nil {
				m.Time, err = parseTimestamp(v)
			}
		case 2:
			m.Width, err = fixed32(num, typ, v)
		case 3:
			m.Height, err = fixed32(num, typ, v)
		case 4:
			if err = want(num, typ, protowire.BytesType); err == nil {
				m.Encoding = string(v)
			}
		case 5:
			m.Step, err = fixed32(num, typ, v)
		case 6:
			if err = want(num, typ, protowire.BytesType); err == nil {
				m.Data = v
			}
		case 7:
			if err = want(num, typ, protowire.BytesType); err == nil {
				m.FrameID = string(v)
			}
		}
		return err
	})
	if err != nil {
		return m, fmt.Errorf("foxglove.RawImage: %w", err)
	}
	return m, nil
}

// Float32s decodes a 32FC1 image into dst (grown when short), row-major
// without padding.
func (m RawImage) Float32s(dst []float32) ([]float32, error) {
	if m.Encoding != Float32Encoding {
		return dst, fmt.Errorf("foxglove.RawImage: encoding %q, want %s", m.Encoding, Float32Encoding)
	}
	w, h, err := m.size(4)
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
			dst[y*w+x] = math.Float32frombits(binary.LittleEndian.Uint32(row[4*x:]))
		}
	}
	return dst, nil
}

// size checks that the image's width, height, step and data hold rows of
// bytesPerPixel-byte pixels, and returns the width and height.
func (m RawImage) size(bytesPerPixel uint64) (w, h int, err error) {
	w, h = int(m.Width), int(m.Height)
	if w <= 0 || h <= 0 || w > 1<<15 || h > 1<<15 || uint64(m.Step) < bytesPerPixel*uint64(w) {
		return 0, 0, fmt.Errorf("foxglove.RawImage: size %dx%d with step %d", w, h, m.Step)
	}
	if uint64(len(m.Data)) < uint64(m.Step)*uint64(h-1)+bytesPerPixel*uint64(w) {
		return 0, 0, fmt.Errorf("foxglove.RawImage: %d data bytes for %dx%d with step %d", len(m.Data), w, h, m.Step)
	}
	return w, h, nil
}

// ParseCameraCalibration decodes a foxglove.CameraCalibration.
func ParseCameraCalibration(b []byte) (CameraCalibration, error) {
	var m CameraCalibration
	doubles := func(num protowire.Number, typ protowire.Type, v []byte, dst *[]float64) error {
		switch typ {
		case protowire.BytesType: // packed
			if len(v)%8 != 0 {
				return fmt.Errorf("field %d: packed doubles of %d bytes", num, len(v))
			}
			for i := 0; i < len(v); i += 8 {
				x, _ := protowire.ConsumeFixed64(v[i:])
				*dst = append(*dst, math.Float64frombits(x))
			}
		case protowire.Fixed64Type:
			x, _ := protowire.ConsumeFixed64(v)
			*dst = append(*dst, math.Float64frombits(x))
		default:
			return fmt.Errorf("field %d has wire type %d, want packed or fixed64 doubles", num, typ)
		}
		return nil
	}
	err := walk(b, func(num protowire.Number, typ protowire.Type, v []byte) (err error) {
		switch num {
		case 1:
			if err = want(num, typ, protowire.BytesType); err == nil {
				m.Time, err = parseTimestamp(v)
			}
		case 2:
			m.Width, err = fixed32(num, typ, v)
		case 3:
			m.Height, err = fixed32(num, typ, v)
		case 4:
			if err = want(num, typ, protowire.BytesType); err == nil {
				m.DistortionModel = string(v)
			}
		case 5:
			err = doubles(num, typ, v, &m.D)
		case 6:
			err = doubles(num, typ, v, &m.K)
		case 7:
			err = doubles(num, typ, v, &m.R)
		case 8:
			err = doubles(num, typ, v, &m.P)
		case 9:
			if err = want(num, typ, protowire.BytesType); err == nil {
				m.FrameID = string(v)
			}
		}
		return err
	})
	if err != nil {
		return m, fmt.Errorf("foxglove.CameraCalibration: %w", err)
	}
	return m, nil
}
