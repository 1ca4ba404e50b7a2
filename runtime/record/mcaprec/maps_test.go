package mcaprec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/x448/float16"

	"github.com/didoedge/didoedge/pkg/mapgrid"
)

// python is Debian's interpreter (the pyenv python3 first on PATH lacks
// Debian's modules); the struct module alone is used here.
const python = "/usr/bin/python3"

// encodeHalf encodes px as a 16UC1 message and returns its data bytes.
func encodeHalf(t *testing.T, px []float32) ([]uint16, bool) {
	t.Helper()
	msg, ok := AppendRawImage16F(nil, time.Unix(1, 0), "cam", len(px), 1, px)
	if !ok {
		return nil, false
	}
	m, err := ParseRawImage(msg)
	if err != nil {
		t.Fatal(err)
	}
	if m.Encoding != Float16Encoding || m.Step != uint32(2*len(px)) || m.Width != uint32(len(px)) {
		t.Fatalf("16UC1 message %+v", m)
	}
	out := make([]uint16, len(px))
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(m.Data[2*i:])
	}
	return out, true
}

// TestFloat16EveryValue: every finite binary16 value survives
// decode-encode bit for bit (the decoder and encoder are inverse on the
// representable values, signed zeros and subnormals included).
func TestFloat16EveryValue(t *testing.T) {
	var data []byte
	for h := range 1 << 16 {
		if h&0x7c00 == 0x7c00 { // Inf, NaN
			continue
		}
		data = binary.LittleEndian.AppendUint16(data, uint16(h))
	}
	n := len(data) / 2 // 63488 = 248 rows of 256
	m := RawImage{Encoding: Float16Encoding, Width: 256, Height: uint32(n / 256), Step: 512, Data: data}
	vals, err := MapChannel{Value: ValueFloat16}.Decode(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(vals) != n {
		t.Fatalf("%d values decoded of %d", len(vals), n)
	}
	back, ok := encodeHalf(t, vals)
	if !ok {
		t.Fatal("a binary16 value was refused")
	}
	for i, b := range back {
		if want := binary.LittleEndian.Uint16(data[2*i:]); b != want {
			t.Fatalf("binary16 %#04x decoded to %v encodes to %#04x", want, vals[i], b)
		}
	}
	if vals[0x3c00] != 1 || vals[0x7bff] != 65504 || vals[1] != float32(math.Ldexp(1, -24)) {
		t.Fatalf("1.0, max and the smallest subnormal decode to %v %v %v", vals[0x3c00], vals[0x7bff], vals[1])
	}
}

// TestFloat16MatchesPython: the rounding of float32 values to binary16
// equals CPython's struct format 'e' (IEEE 754 binary16, round half to
// even), on random values over binary16's whole range and on the exact
// midpoints between neighbours, where the rounding direction matters.
func TestFloat16MatchesPython(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var px []float32
	for range 4000 {
		e := rng.IntN(45) - 30 // [2^-30, 2^15)
		v := float32(math.Ldexp(1+rng.Float64(), e))
		if rng.IntN(4) == 0 {
			v = -v
		}
		px = append(px, v)
	}
	for h := uint16(0x0001); h < 0x7bff; h += 37 { // midpoints of neighbours h, h+1
		a := float64(float16Value(h))
		b := float64(float16Value(h + 1))
		px = append(px, float32((a+b)/2))
	}
	px = append(px, 65504, 65519.99, 0, float32(math.Copysign(0, -1)), 1e-9)
	got, ok := encodeHalf(t, px)
	if !ok {
		t.Fatal("an in-range value was refused")
	}
	var in strings.Builder
	for _, v := range px {
		in.WriteString(strconv.FormatFloat(float64(v), 'g', -1, 64)) // the float32 exactly, as Python's double
		in.WriteByte('\n')
	}
	const script = `import struct, sys
for line in sys.stdin:
    print(struct.unpack('<H', struct.pack('<e', float(line)))[0])`
	cmd := exec.Command(python, "-c", script)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", python, err)
	}
	lines := strings.Fields(string(out))
	if len(lines) != len(px) {
		t.Fatalf("python gave %d values for %d", len(lines), len(px))
	}
	for i, l := range lines {
		want, _ := strconv.Atoi(l)
		if got[i] != uint16(want) {
			t.Fatalf("%v: binary16 %#04x, python %#04x", px[i], got[i], want)
		}
	}
}

// float16Value decodes binary16 bits with the package's decoder.
func float16Value(h uint16) float32 {
	m := RawImage{Encoding: Float16Encoding, Width: 1, Height: 1, Step: 2, Data: binary.LittleEndian.AppendUint16(nil, h)}
	v, err := MapChannel{Value: ValueFloat16}.Decode(m, nil)
	if err != nil {
		panic(err)
	}
	return v[0]
}

// TestFloat16Range: a finite value that rounds beyond 65504 is refused
// (the recorder then writes the map in float32); infinities and NaN pass
// through as themselves.
func TestFloat16Range(t *testing.T) {
	for _, v := range []float32{65520, -70000, 1e30} {
		if _, ok := encodeHalf(t, []float32{1, v}); ok {
			t.Errorf("%v accepted", v)
		}
	}
	got, ok := encodeHalf(t, []float32{float32(math.Inf(1)), float32(math.NaN()), 65519})
	if !ok || got[0] != 0x7c00 || got[1]&0x7c00 != 0x7c00 || got[1]&0x3ff == 0 || got[2] != 0x7bff {
		t.Fatalf("Inf, NaN, 65519: %#04x (ok %v)", got, ok)
	}
}

// TestMapChannelMetadata: the metadata written for a channel reads back
// as the same channel; damaged metadata gives an error naming the key;
// channels of older recordings (no keys) are frame-size float32 maps.
func TestMapChannelMetadata(t *testing.T) {
	g := mapgrid.Fit(960, 540, 640, 192, mapgrid.Letterbox)
	computed := MapChannel{Resolution: ResolutionComputed, Grid: g, Value: ValueFloat16, MantissaBits: 23}
	md := computed.Metadata()
	if md[ContentRectKey] != fmt.Sprintf("%d,0,%d,192", g.X0, g.CW) || md[FrameSizeKey] != "960x540" || md[InputSizeKey] != "640x192" {
		t.Fatalf("metadata %v of %+v", md, g)
	}
	got, err := ParseMapChannel(md)
	if err != nil || got != computed {
		t.Fatalf("read back %+v (%v), want %+v", got, err, computed)
	}
	old, err := ParseMapChannel(map[string]string{"camera": "front", "unit": "m"})
	if err != nil || old.Resolution != ResolutionFrame || old.Value != ValueFloat32 || old.MantissaBits != 23 {
		t.Fatalf("an old channel reads as %+v (%v)", old, err)
	}
	with := func(k, v string) map[string]string {
		m := computed.Metadata()
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name string
		md   map[string]string
		want string
	}{
		{"resolution", with(ResolutionKey, "native"), "resolution"},
		{"value encoding", with(ValueEncodingKey, "bfloat16"), "value_encoding"},
		{"mantissa bits", func() map[string]string {
			m := with(MantissaBitsKey, "30")
			m[ValueEncodingKey] = ValueFloat32
			return m
		}(), "mantissa_bits"},
		{"another rule", with(ResizeKey, "nearest"), "resize"},
		{"no rule", with(ResizeKey, ""), "resize"},
		{"frame size", with(FrameSizeKey, "960"), "frame_size"},
		{"input size", with(InputSizeKey, "640x-1"), "input_size"},
		{"rect", with(ContentRectKey, "0,0,640"), "content_rect"},
		{"rect outside", with(ContentRectKey, "10,0,640,192"), "not a valid placement"},
	} {
		if _, err := ParseMapChannel(tc.md); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}

// TestFrameMap: a computed map comes back to the frame through the grid's
// bilinear resampling (mapgrid.Remap, whose arithmetic is tested in its
// package), and a frame-size map is copied.
func TestFrameMap(t *testing.T) {
	g := mapgrid.Fit(12, 6, 8, 8, mapgrid.Letterbox)
	c := MapChannel{Resolution: ResolutionComputed, Grid: g, Value: ValueFloat16}
	src := make([]float32, 4*4)
	for i := range src {
		src[i] = float32(i)
	}
	got, w, h, err := c.FrameMap(src, 4, 4, nil)
	if err != nil || w != 12 || h != 6 {
		t.Fatalf("frame map %dx%d: %v", w, h, err)
	}
	want := make([]float32, 12*6)
	if err := mapgrid.NewRemap(g, 4, 4).Apply(src, want); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("frame map %v, want %v", got, want)
	}
	if _, _, _, err := c.FrameMap(src[:15], 4, 4, nil); err == nil {
		t.Fatal("a short map was accepted")
	}
	f := MapChannel{Resolution: ResolutionFrame, Value: ValueFloat32}
	got, w, h, err = f.FrameMap(src, 4, 4, nil)
	if err != nil || w != 4 || h != 4 || !bytes.Equal(float32Bytes(got), float32Bytes(src)) {
		t.Fatalf("frame-size map %v %dx%d %v", got, w, h, err)
	}
}

func float32Bytes(v []float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// FuzzParseMapChannel: channel metadata comes from files; parsing never
// panics, and what parses writes back to metadata that parses the same.
func FuzzParseMapChannel(f *testing.F) {
	g := mapgrid.Fit(960, 540, 640, 192, mapgrid.Letterbox)
	md := MapChannel{Resolution: ResolutionComputed, Grid: g, Value: ValueFloat16}.Metadata()
	f.Add(md[ResolutionKey], md[FrameSizeKey], md[InputSizeKey], md[ContentRectKey], md[ValueEncodingKey], "")
	f.Add("frame", "", "", "", "float32", "10")
	f.Fuzz(func(t *testing.T, res, frame, input, rect, value, bits string) {
		in := map[string]string{ResolutionKey: res, FrameSizeKey: frame, InputSizeKey: input, ContentRectKey: rect,
			ValueEncodingKey: value, ResizeKey: ResizeRule}
		if bits != "" {
			in[MantissaBitsKey] = bits
		}
		c, err := ParseMapChannel(in)
		if err != nil {
			return
		}
		again, err := ParseMapChannel(c.Metadata())
		if err != nil || again != c {
			t.Fatalf("%+v wrote metadata that reads as %+v (%v)", c, again, err)
		}
	})
}

// TestToHalfAgreesWithX448: the fast path rounds as x448/float16's
// conversion (tested by its author on all 2^32 inputs) on every float32
// whose low 9 bits are 0 or 0x1ff, and every float32 around the rounding
// point of each binary16 (8.4 million values in all).
func TestToHalfAgreesWithX448(t *testing.T) {
	check := func(b uint32) {
		h, ok := toHalf(b)
		want := float16.Fromfloat32(math.Float32frombits(b))
		overflow := want.IsInf(0) && !math.IsInf(float64(math.Float32frombits(b)), 0)
		if ok == overflow || ok && h != uint16(want) && !want.IsNaN() {
			t.Fatalf("%#08x (%v): %#04x ok %v, x448 %#04x", b, math.Float32frombits(b), h, ok, uint16(want))
		}
	}
	for hi := uint32(0); hi < 1<<23; hi++ {
		check(hi << 9)
		check(hi<<9 | 0x1ff)
	}
	for h := uint32(0); h < 1<<15; h++ { // around the midpoint above each binary16
		f := math.Float32bits(float16.Frombits(uint16(h)).Float32())
		for _, d := range []uint32{0xfff, 0x1000, 0x1001} {
			check(f + d)
			check(f + d | 0x80000000)
		}
	}
}
