//go:build !nolibav

package h264

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// accessUnits splits an Annex-B file into access units at its AUD NAL units
// (the files are written with x264's aud=1).
func accessUnits(t testing.TB, b []byte) [][][]byte {
	t.Helper()
	units, err := SplitAnnexB(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	var aus [][][]byte
	for _, u := range units {
		if u[0]&0x1f == 9 || len(aus) == 0 {
			aus = append(aus, nil)
		}
		aus[len(aus)-1] = append(aus[len(aus)-1], u)
	}
	return aus
}

// ffmpegRGB decodes path with ffmpeg into raw rgb24 with the same swscale
// flags as the Decoder: the reference picture.
func ffmpegRGB(t testing.TB, path string) []byte {
	t.Helper()
	bin, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Fatalf("ffmpeg not installed (scripts/deps.sh installs it): %v", err)
	}
	out, err := exec.Command(bin, "-hide_banner", "-loglevel", "error", "-nostdin", "-i", path,
		"-sws_flags", "bilinear+accurate_rnd", "-f", "rawvideo", "-pix_fmt", "rgb24", "-").Output()
	if err != nil {
		t.Fatalf("ffmpeg decode %s: %v", path, err)
	}
	return out
}

func meanAbsDiff(a, b []byte) float64 {
	var s int
	for i := range a {
		d := int(a[i]) - int(b[i])
		if d < 0 {
			d = -d
		}
		s += d
	}
	return float64(s) / float64(len(a))
}

// TestDecodeMatchesFFmpeg decodes two concatenated streams of different
// resolutions and checks every picture against ffmpeg's decode.
func TestDecodeMatchesFFmpeg(t *testing.T) {
	files := []struct {
		path string
		w, h int
		n    int
	}{
		{"testdata/tiny.h264", 64, 48, 4},
		{"testdata/tiny96.h264", 96, 64, 3},
	}
	d, err := NewDecoder(H264)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var rgb []uint8
	for _, f := range files {
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		ref := ffmpegRGB(t, f.path)
		size := f.w * f.h * 3
		if len(ref) != f.n*size {
			t.Fatalf("%s: ffmpeg gave %d bytes, want %d frames of %d", f.path, len(ref), f.n, size)
		}
		got := 0
		for _, au := range accessUnits(t, b) {
			out, w, h, ok, err := d.Decode(au, rgb)
			rgb = out
			if err != nil {
				t.Fatalf("%s AU %d: %v", f.path, got, err)
			}
			if !ok {
				continue
			}
			if w != f.w || h != f.h || len(out) != size {
				t.Fatalf("%s frame %d: %dx%d (%d bytes), want %dx%d", f.path, got, w, h, len(out), f.w, f.h)
			}
			if mae := meanAbsDiff(out, ref[got*size:(got+1)*size]); mae > 0.5 {
				t.Errorf("%s frame %d: mean abs diff to ffmpeg %.3f > 0.5", f.path, got, mae)
			}
			got++
		}
		if got != f.n {
			t.Errorf("%s: %d pictures, want %d", f.path, got, f.n)
		}
	}
}

// TestDecodeGarbage: corrupt access units return errors or nothing, and the
// decoder still decodes a valid stream afterwards.
func TestDecodeGarbage(t *testing.T) {
	d, err := NewDecoder(H264)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	garbage := [][][]byte{
		{{0x65, 0xff, 0xff, 0xff, 0xff}},
		{{0x67, 0x00}, {0x68}, {0x65, 0x88, 0x84, 0x00}},
		{{0x41, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{{}, {}},
	}
	for i, au := range garbage {
		if _, _, _, ok, _ := d.Decode(au, nil); ok {
			t.Errorf("garbage AU %d produced a picture", i)
		}
	}
	b, err := os.ReadFile(filepath.Join("testdata", "tiny.h264"))
	if err != nil {
		t.Fatal(err)
	}
	pictures := 0
	for _, au := range accessUnits(t, b) {
		if _, _, _, ok, err := d.Decode(au, nil); err != nil {
			t.Fatal(err)
		} else if ok {
			pictures++
		}
	}
	if pictures != 4 {
		t.Errorf("%d pictures after garbage, want 4", pictures)
	}
}

// BenchmarkDecode640x192 decodes a 640x192 libx264 stream (GOP 15) and
// converts every picture to RGB24: one iteration is one access unit.
func BenchmarkDecode640x192(b *testing.B) {
	bin, err := exec.LookPath("ffmpeg")
	if err != nil {
		b.Skipf("ffmpeg not installed: %v", err)
	}
	path := filepath.Join(b.TempDir(), "bench.h264")
	if out, err := exec.Command(bin, "-hide_banner", "-loglevel", "error", "-nostdin", "-f", "lavfi",
		"-i", "testsrc=size=640x192:rate=15", "-frames:v", "30", "-c:v", "libx264", "-pix_fmt", "yuv420p",
		"-g", "15", "-tune", "zerolatency", "-x264-params", "aud=1", "-f", "h264", path).CombinedOutput(); err != nil {
		b.Fatalf("ffmpeg: %v: %s", err, out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	aus := accessUnits(b, data)
	d, err := NewDecoder(H264)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	rgb := make([]uint8, 640*192*3)
	// One pass warms the decoder and the buffers.
	for _, au := range aus {
		rgb, _, _, _, _ = d.Decode(au, rgb)
	}
	b.SetBytes(640 * 192 * 3)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var ok bool
		rgb, _, _, ok, err = d.Decode(aus[i%len(aus)], rgb)
		if err != nil || !ok {
			b.Fatalf("AU %d: ok=%v err=%v", i%len(aus), ok, err)
		}
	}
}
