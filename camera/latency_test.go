package camera_test

import (
	"bytes"
	"context"
	"image"
	"image/jpeg"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/bluenviron/gortsplib/v4"
	"github.com/bluenviron/gortsplib/v4/pkg/description"
	"github.com/bluenviron/gortsplib/v4/pkg/format"
	"github.com/pion/rtp"

	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/camera/h264"
)

// BenchmarkPublishToFrame measures, on loopback, the time from handing one
// 640x192 picture to an RTSP publisher until the client's Next returns it
// decoded to RGB: packetization, relay by the in-process server,
// depacketization, decode and colour conversion. One op is one frame.
func BenchmarkPublishToFrame(b *testing.B) {
	b.Run("mjpeg", func(b *testing.B) {
		img := image.NewRGBA(image.Rect(0, 0, 640, 192))
		for i := range img.Pix {
			img.Pix[i] = uint8(i * 13)
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 85}); err != nil {
			b.Fatal(err)
		}
		f := &format.MJPEG{}
		enc, err := f.CreateEncoder()
		if err != nil {
			b.Fatal(err)
		}
		benchPublish(b, f, func(int) ([]*rtp.Packet, error) { return enc.Encode(buf.Bytes()) })
	})
	b.Run("h264", func(b *testing.B) {
		bin := needTool(b, "ffmpeg")
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
		units, err := h264.SplitAnnexB(nil, data)
		if err != nil {
			b.Fatal(err)
		}
		var aus [][][]byte
		for _, u := range units {
			if u[0]&0x1f == 9 || len(aus) == 0 {
				aus = append(aus, nil)
			}
			aus[len(aus)-1] = append(aus[len(aus)-1], u)
		}
		f := &format.H264{PayloadTyp: 96, PacketizationMode: 1}
		enc, err := f.CreateEncoder()
		if err != nil {
			b.Fatal(err)
		}
		benchPublish(b, f, func(i int) ([]*rtp.Packet, error) { return enc.Encode(aus[i%len(aus)]) })
	})
}

func benchPublish(b *testing.B, forma format.Format, packets func(i int) ([]*rtp.Packet, error)) {
	srv := startServer(b, nil)
	url := "rtsp://" + srv.Addr() + "/bench"
	medi := &description.Media{Type: description.MediaTypeVideo, Formats: []format.Format{forma}}
	tcp := gortsplib.TransportTCP
	pub := &gortsplib.Client{Transport: &tcp}
	if err := pub.StartRecording(url, &description.Session{Medias: []*description.Media{medi}}); err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	src, err := camera.NewRTSPSource(camera.RTSPConfig{URL: url, StallTimeout: time.Minute, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { src.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	send := func(i int) {
		pkts, err := packets(i)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range pkts {
			p.Timestamp = uint32(i * 6000)
			if err := pub.WritePacketRTP(medi, p); err != nil {
				b.Fatal(err)
			}
		}
	}
	var fr camera.Frame
	// Wait for the reader to be playing: keep sending until a frame arrives.
	deadline := time.Now().Add(10 * time.Second)
	i := 0
	for {
		send(i)
		i++
		wctx, wcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := src.Next(wctx, &fr)
		wcancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("reader never received a frame")
		}
	}
	// Restart at a keyframe boundary so every op yields exactly one picture.
	i = 0
	for ; i < 30; i++ {
		send(i)
		if err := src.Next(context.Background(), &fr); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		send(i)
		i++
		if err := src.Next(context.Background(), &fr); err != nil {
			b.Fatal(err)
		}
	}
}
