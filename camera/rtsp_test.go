package camera_test

import (
	"context"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/camera/rtspserver"
)

// TestFFmpegPublishDecodes publishes a static pattern from Debian's ffmpeg
// into the in-process server and checks that the client decodes pictures
// equal to the pattern within codec tolerance, and unequal to a shifted one
// (so the comparison can fail).
func TestFFmpegPublishDecodes(t *testing.T) {
	const w, h = 640, 192
	want := make([]uint8, w*h*3)
	fillPattern(want, w, h)
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < w*h; i++ {
		copy(img.Pix[4*i:4*i+3], want[3*i:3*i+3])
		img.Pix[4*i+3] = 255
	}
	pngPath := filepath.Join(t.TempDir(), "pattern.png")
	f, err := os.Create(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
	f.Close()
	shifted := make([]uint8, len(want))
	copy(shifted, want[3*w*h/2:])
	copy(shifted[len(want)-3*w*h/2:], want)

	cases := []struct {
		name   string
		codec  string
		enc    []string
		maxMAE float64
	}{
		{"h264", "H264", []string{"-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "15", "-tune", "zerolatency", "-preset", "ultrafast"}, 4},
		{"h265", "H265", []string{"-c:v", "libx265", "-pix_fmt", "yuv420p", "-g", "15", "-tune", "zerolatency", "-preset", "ultrafast", "-x265-params", "log-level=error"}, 4},
		{"mjpeg", "MJPEG", []string{"-c:v", "mjpeg", "-huffman", "default", "-pix_fmt", "yuvj420p", "-q:v", "3"}, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, nil)
			url := "rtsp://" + srv.Addr() + "/live"
			args := []string{"-re", "-loop", "1", "-framerate", "15", "-i", pngPath, "-t", "30"}
			args = append(args, tc.enc...)
			args = append(args, "-f", "rtsp", "-rtsp_transport", "tcp", url)
			startFFmpeg(t, args...)

			src, err := camera.NewRTSPSource(camera.RTSPConfig{URL: url, BackoffMin: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			runSource(t, src)
			var fr camera.Frame
			var last uint64
			for i := 0; i < 5; i++ {
				if err := nextFrame(t, src, &fr, 15*time.Second); err != nil {
					t.Fatal(err)
				}
				if fr.Seq <= last {
					t.Fatalf("seq %d after %d", fr.Seq, last)
				}
				last = fr.Seq
			}
			if fr.Codec != tc.codec || fr.Width != w || fr.Height != h || len(fr.RGB) != w*h*3 {
				t.Fatalf("frame %s %dx%d len %d, want %s %dx%d", fr.Codec, fr.Width, fr.Height, len(fr.RGB), tc.codec, w, h)
			}
			if lat := fr.Decoded.Sub(fr.Capture); lat < 0 || lat > 5*time.Second {
				t.Errorf("capture-to-decoded latency %v out of [0, 5s]", lat)
			}
			mae := meanAbsDiff(fr.RGB, want)
			if mae > tc.maxMAE {
				t.Errorf("mean abs diff to the source pattern %.2f > %.1f", mae, tc.maxMAE)
			}
			if bad := meanAbsDiff(fr.RGB, shifted); bad < 4*tc.maxMAE {
				t.Errorf("mean abs diff to a shifted pattern only %.2f: the comparison cannot tell pictures apart", bad)
			}
			t.Logf("%s: MAE %.2f (shifted %.2f), seq %d, stats %+v", tc.name, mae, meanAbsDiff(fr.RGB, shifted), fr.Seq, src.Stats())
		})
	}
}

// TestGeneratedStreamDecodes reads the server's own generated path, M-JPEG
// over TCP and UDP and H.264 (libx264) over TCP.
func TestGeneratedStreamDecodes(t *testing.T) {
	const w, h = 320, 96
	want := make([]uint8, w*h*3)
	fillPattern(want, w, h)
	cases := []struct {
		name, codec, wantCodec string
		udp                    bool
	}{
		{"mjpeg-tcp", rtspserver.CodecMJPEG, "MJPEG", false},
		{"mjpeg-udp", rtspserver.CodecMJPEG, "MJPEG", true},
		{"h264-tcp", rtspserver.CodecH264, "H264", false},
	}
	for _, tc := range cases {
		udp := tc.udp
		t.Run(tc.name, func(t *testing.T) {
			cfg := rtspserver.Config{Addr: freeAddr(t), Generated: map[string]rtspserver.Generated{"sim": {Source: pattern{w, h}, FPS: 30, Codec: tc.codec}}, Logger: quietLogger()}
			if udp {
				cfg.UDPRTPAddr, cfg.UDPRTCPAddr = freeUDPPair(t)
			}
			srv, err := rtspserver.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			src, err := camera.NewRTSPSource(camera.RTSPConfig{URL: "rtsp://" + srv.Addr() + "/sim", UDP: udp, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			runSource(t, src)
			var fr camera.Frame
			if err := nextFrame(t, src, &fr, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			if fr.Width != w || fr.Height != h || fr.Codec != tc.wantCodec {
				t.Fatalf("got %s %dx%d", fr.Codec, fr.Width, fr.Height)
			}
			if mae := meanAbsDiff(fr.RGB, want); mae > 3 {
				t.Errorf("mean abs diff %.2f > 3", mae)
			}
		})
	}
}

// TestProbe reads a generated 30 fps stream and measures its rate from the
// capture timestamps.
func TestProbe(t *testing.T) {
	srv := startServer(t, map[string]rtspserver.Generated{"sim": {Source: pattern{64, 32}, FPS: 30}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls := 0
	rep, err := camera.Probe(ctx, camera.RTSPConfig{URL: "rtsp://" + srv.Addr() + "/sim", Logger: quietLogger()}, 16,
		func(*camera.Frame) { calls++ })
	if err != nil {
		t.Fatal(err)
	}
	if rep.Codec != "MJPEG" || rep.Width != 64 || rep.Height != 32 || rep.Frames != 16 || calls != 16 {
		t.Fatalf("report %+v, %d callbacks", rep, calls)
	}
	// Consecutive delivered frames are 1/30 s apart unless one was dropped,
	// so the measured rate lies in (15, 31].
	if rep.FPS <= 15 || rep.FPS > 31 {
		t.Errorf("measured %.2f fps for a 30 fps stream", rep.FPS)
	}
	if q := rep.LatencyQuantile(0.5); q < 0 || q > time.Second {
		t.Errorf("median latency %v", q)
	}
	if len(rep.Events) == 0 || rep.Events[0].Kind != camera.EventConnected {
		t.Errorf("events %+v, want connected first", rep.Events)
	}
}

// TestProbeGivesUpWithReason: nothing listens; the probe ends with the
// context and names the last fault.
func TestProbeGivesUpWithReason(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	addr := freeAddr(t)
	_, err := camera.Probe(ctx, camera.RTSPConfig{URL: "rtsp://" + addr + "/x", BackoffMin: 50 * time.Millisecond, Logger: quietLogger()}, 1, nil)
	if err == nil || !strings.Contains(err.Error(), "last fault") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("err %v, want the last fault naming %s", err, addr)
	}
}
