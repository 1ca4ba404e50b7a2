package dataset

import (
	"bytes"
	"image"
	"image/png"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestRGBRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range [][2]int{{1, 1}, {7, 3}, {64, 19}} {
		w, h := size[0], size[1]
		rgb := make([]uint8, 3*w*h)
		for i := range rgb {
			rgb[i] = uint8(rng.IntN(256))
		}
		var buf bytes.Buffer
		if err := EncodeRGBPNG(&buf, w, h, rgb); err != nil {
			t.Fatal(err)
		}
		gw, gh, got, err := DecodeRGBPNG(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if gw != w || gh != h || !bytes.Equal(got, rgb) {
			t.Fatalf("%dx%d: RGB round trip changed the image", w, h)
		}
	}
}

func TestDepthRoundTripExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	w, h := 33, 17
	depth := make([]float32, w*h)
	for i := range depth {
		// every representable value k/256 must survive exactly
		depth[i] = float32(rng.IntN(65536)) / KITTIDepthScale
	}
	depth[0], depth[1], depth[2] = 0, 65535.0/256, 1.0/256
	var buf bytes.Buffer
	if err := EncodeDepthPNG(&buf, w, h, depth, KITTIDepthScale); err != nil {
		t.Fatal(err)
	}
	gw, gh, got, err := DecodeDepthPNG(buf.Bytes(), KITTIDepthScale)
	if err != nil {
		t.Fatal(err)
	}
	if gw != w || gh != h {
		t.Fatalf("size %dx%d", gw, gh)
	}
	for i := range depth {
		if got[i] != depth[i] {
			t.Fatalf("pixel %d: %v became %v", i, depth[i], got[i])
		}
	}
}

func TestQuantizeDepth(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	cases := []struct {
		d     float32
		scale float64
		want  uint16
	}{
		{0, 256, 0}, {-3, 256, 0}, {nan, 256, 0}, {inf, 256, 0},
		{1, 256, 256}, {1.5 / 256, 256, 2}, {80, 256, 20480}, {300, 256, 65535},
		{1.2345, 1000, 1235},
	}
	for _, c := range cases {
		if got := QuantizeDepth(c.d, c.scale); got != c.want {
			t.Errorf("QuantizeDepth(%v, %v) = %d, want %d", c.d, c.scale, got, c.want)
		}
	}
}

func TestLabelRoundTrip(t *testing.T) {
	w, h := 40, 9
	labels := make([]uint8, w*h)
	for i := range labels {
		labels[i] = uint8(i * 7)
	}
	var buf bytes.Buffer
	if err := EncodeLabelPNG(&buf, w, h, labels); err != nil {
		t.Fatal(err)
	}
	gw, gh, got, err := DecodeLabelPNG(buf.Bytes())
	if err != nil || gw != w || gh != h || !bytes.Equal(got, labels) {
		t.Fatalf("label round trip: %v %dx%d equal=%v", err, gw, gh, bytes.Equal(got, labels))
	}
}

func TestDecodeRejectsBadPNGs(t *testing.T) {
	var rgb, gray8 bytes.Buffer
	EncodeRGBPNG(&rgb, 4, 4, make([]uint8, 48))
	png.Encode(&gray8, image.NewGray(image.Rect(0, 0, 4, 4)))
	cases := []struct {
		name string
		data []byte
		dec  func([]byte) error
		want string
	}{
		{"empty depth", nil, decDepth, "not a PNG"},
		{"text depth", []byte("hello world, not a png"), decDepth, "not a PNG"},
		{"truncated depth", rgb.Bytes()[:len(rgb.Bytes())/2], decDepth, ""},
		{"8-bit depth", gray8.Bytes(), decDepth, "16-bit"},
		{"rgb as labels", rgb.Bytes(), decLabel, "8-bit"},
		{"truncated rgb", rgb.Bytes()[:30], decRGB, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.dec(c.data)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func decDepth(b []byte) error { _, _, _, err := DecodeDepthPNG(b, 256); return err }
func decLabel(b []byte) error { _, _, _, err := DecodeLabelPNG(b); return err }
func decRGB(b []byte) error   { _, _, _, err := DecodeRGBPNG(b); return err }

func FuzzDecodeDepthPNG(f *testing.F) {
	var buf bytes.Buffer
	EncodeDepthPNG(&buf, 3, 2, []float32{0, 1, 2, 3, 80, 0.5}, 256)
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:20])
	f.Add([]byte("\x89PNG\r\n\x1a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, h, d, err := DecodeDepthPNG(data, 256)
		if err == nil && len(d) != w*h {
			t.Fatalf("%dx%d image with %d values", w, h, len(d))
		}
		w, h, rgb, err := DecodeRGBPNG(data)
		if err == nil && len(rgb) != 3*w*h {
			t.Fatalf("%dx%d image with %d bytes", w, h, len(rgb))
		}
		w, h, l, err := DecodeLabelPNG(data)
		if err == nil && len(l) != w*h {
			t.Fatalf("%dx%d image with %d labels", w, h, len(l))
		}
	})
}
