package camera

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/bluenviron/gortsplib/v4/pkg/format"
	"github.com/pion/rtp"

	"github.com/didoedge/didoedge/camera/h264"
)

// packetStream frames RTP packets as [uint16 length][packet] records, the
// fuzz input format of the pipeline fuzzers.
func packetStream(t testing.TB, pkts []*rtp.Packet) []byte {
	t.Helper()
	var out []byte
	for _, p := range pkts {
		b, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		out = binary.BigEndian.AppendUint16(out, uint16(len(b)))
		out = append(out, b...)
	}
	return out
}

// pushStream feeds a packet stream through p and returns how many pictures
// came out; it fails the test on an inconsistent picture.
func pushStream(t *testing.T, p *videoPipeline, data []byte) int {
	var rgb []uint8
	pictures := 0
	for len(data) >= 2 {
		n := int(binary.BigEndian.Uint16(data))
		data = data[2:]
		n = min(n, len(data))
		var pkt rtp.Packet
		err := pkt.Unmarshal(data[:n])
		data = data[n:]
		if err != nil {
			continue
		}
		out, w, h, err := p.push(&pkt, rgb)
		rgb = out
		if err != nil {
			continue
		}
		if w <= 0 || h <= 0 || len(out) != w*h*3 {
			t.Fatalf("picture %dx%d with %d bytes", w, h, len(out))
		}
		pictures++
	}
	return pictures
}

func testJPEG(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 80}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func mjpegSeed(t testing.TB) []byte {
	f := &format.MJPEG{}
	enc, err := f.CreateEncoder()
	if err != nil {
		t.Fatal(err)
	}
	enc.PayloadMaxSize = 200
	var pkts []*rtp.Packet
	for i := 0; i < 2; i++ {
		p, err := enc.Encode(testJPEG(t, 32, 16))
		if err != nil {
			t.Fatal(err)
		}
		for _, pk := range p {
			pk.Timestamp = uint32(i * 3000)
		}
		pkts = append(pkts, p...)
	}
	return packetStream(t, pkts)
}

func h264Seed(t testing.TB) []byte {
	b, err := os.ReadFile("h264/testdata/tiny.h264")
	if err != nil {
		t.Fatal(err)
	}
	units, err := h264.SplitAnnexB(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	f := &format.H264{PayloadTyp: 96, PacketizationMode: 1}
	enc, err := f.CreateEncoder()
	if err != nil {
		t.Fatal(err)
	}
	enc.PayloadMaxSize = 300 // forces FU-A fragmentation
	var pkts []*rtp.Packet
	var au [][]byte
	flush := func(ts uint32) {
		if len(au) == 0 {
			return
		}
		p, err := enc.Encode(au)
		if err != nil {
			t.Fatal(err)
		}
		for _, pk := range p {
			pk.Timestamp = ts
		}
		pkts = append(pkts, p...)
		au = nil
	}
	ts := uint32(0)
	for _, u := range units {
		if u[0]&0x1f == 9 { // access unit delimiter starts a new AU
			flush(ts)
			ts += 6000
		}
		au = append(au, u)
	}
	flush(ts)
	return packetStream(t, pkts)
}

// TestPipelineDecodesSeeds shows the fuzz seeds are real streams: they
// decode to the expected number of pictures.
func TestPipelineDecodesSeeds(t *testing.T) {
	cases := []struct {
		name  string
		forma format.Format
		data  []byte
		want  int
	}{
		{"mjpeg", &format.MJPEG{}, mjpegSeed(t), 2},
		{"h264", &format.H264{PayloadTyp: 96, PacketizationMode: 1}, h264Seed(t), 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newVideoPipeline(tc.forma)
			if err != nil {
				t.Fatal(err)
			}
			defer p.close()
			// Both depacketizers complete a picture on the RTP marker bit.
			if got := pushStream(t, p, tc.data); got != tc.want {
				t.Fatalf("%d pictures, want %d", got, tc.want)
			}
		})
	}
}

// FuzzMJPEGPipeline: arbitrary RTP/JPEG packets never panic the
// depacketizer or the JPEG decode, and every picture is consistent.
func FuzzMJPEGPipeline(f *testing.F) {
	seed := mjpegSeed(f)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte{0, 12, 0x80, 26, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := newVideoPipeline(&format.MJPEG{})
		if err != nil {
			t.Fatal(err)
		}
		defer p.close()
		pushStream(t, p, data)
	})
}

// FuzzH264Pipeline: arbitrary RTP/H.264 packets (single NAL, STAP-A, FU-A)
// through NAL assembly, Annex-B framing and libavcodec never panic.
func FuzzH264Pipeline(f *testing.F) {
	seed := h264Seed(f)
	f.Add(seed)
	f.Add(seed[:len(seed)/3])
	corrupt := bytes.Clone(seed)
	for i := 40; i < len(corrupt); i += 97 {
		corrupt[i] ^= 0x5a
	}
	f.Add(corrupt)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := newVideoPipeline(&format.H264{PayloadTyp: 96, PacketizationMode: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer p.close()
		pushStream(t, p, data)
	})
}

// TestImageToRGBMatchesStdlib compares the unrolled YCbCr conversion with
// color.YCbCrToRGB for every subsampling ratio, exactly.
func TestImageToRGBMatchesStdlib(t *testing.T) {
	ratios := []image.YCbCrSubsampleRatio{
		image.YCbCrSubsampleRatio444, image.YCbCrSubsampleRatio422, image.YCbCrSubsampleRatio420,
		image.YCbCrSubsampleRatio440, image.YCbCrSubsampleRatio411, image.YCbCrSubsampleRatio410,
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, ratio := range ratios {
		t.Run(ratio.String(), func(t *testing.T) {
			img := image.NewYCbCr(image.Rect(0, 0, 37, 23), ratio)
			for _, pl := range [][]uint8{img.Y, img.Cb, img.Cr} {
				for i := range pl {
					pl[i] = uint8(r.IntN(256))
				}
			}
			rgb, w, h := ImageToRGB(img, nil)
			if w != 37 || h != 23 {
				t.Fatalf("size %dx%d", w, h)
			}
			for y := 0; y < h; y++ {
				for x := 0; x < w; x++ {
					c := img.YCbCrAt(x, y)
					wr, wg, wb := color.YCbCrToRGB(c.Y, c.Cb, c.Cr)
					i := 3 * (y*w + x)
					if rgb[i] != wr || rgb[i+1] != wg || rgb[i+2] != wb {
						t.Fatalf("(%d,%d): got %v, want %v", x, y, rgb[i:i+3], []uint8{wr, wg, wb})
					}
				}
			}
		})
	}
}

// BenchmarkMJPEGDecode640x192 decodes a 640x192 JPEG (quality 85, 4:2:0)
// and converts it to RGB24.
func BenchmarkMJPEGDecode640x192(b *testing.B) {
	img := image.NewRGBA(image.Rect(0, 0, 640, 192))
	for y := 0; y < 192; y++ {
		for x := 0; x < 640; x++ {
			i := img.PixOffset(x, y)
			img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = uint8(x), uint8(y), uint8(x^y), 255
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 85}); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	rgb := make([]uint8, 640*192*3)
	b.SetBytes(int64(len(rgb)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var err error
		if rgb, _, _, err = DecodeJPEG(data, rgb); err != nil {
			b.Fatal(err)
		}
	}
}
