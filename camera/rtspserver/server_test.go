package rtspserver

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

type gradient struct{ w, h int }

func (g gradient) Size() (int, int) { return g.w, g.h }

func (g gradient) Render(index int, rgb []uint8) error {
	for i := range rgb {
		rgb[i] = uint8(i + index)
	}
	return nil
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestFFprobeReadsGeneratedStream: Debian's ffprobe, an independent RTSP
// client, reads the generated path and sees M-JPEG of the configured size.
func TestFFprobeReadsGeneratedStream(t *testing.T) {
	bin, err := exec.LookPath("ffprobe")
	if err != nil {
		t.Fatalf("ffprobe not installed (scripts/deps.sh installs it): %v", err)
	}
	for _, codec := range []string{CodecMJPEG, CodecH264} {
		t.Run(codec, func(t *testing.T) { probeGenerated(t, bin, codec) })
	}
}

func probeGenerated(t *testing.T, bin, codec string) {
	s, err := New(Config{Addr: freeAddr(t), Generated: map[string]Generated{"/sim": {Source: gradient{160, 48}, FPS: 15, Codec: codec}}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cmd := exec.Command(bin, "-v", "error", "-rtsp_transport", "tcp", "-select_streams", "v:0",
		"-show_entries", "stream=codec_name,width,height,avg_frame_rate", "-of", "json", "-timeout", "5000000",
		"rtsp://"+s.Addr()+"/sim")
	timer := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ffprobe: %v", err)
	}
	var probe struct {
		Streams []struct {
			CodecName string `json:"codec_name"`
			Width     int    `json:"width"`
			Height    int    `json:"height"`
		} `json:"streams"`
	}
	if err := json.Unmarshal(out, &probe); err != nil {
		t.Fatalf("ffprobe output %q: %v", out, err)
	}
	if len(probe.Streams) != 1 || probe.Streams[0].CodecName != codec || probe.Streams[0].Width != 160 || probe.Streams[0].Height != 48 {
		t.Fatalf("ffprobe saw %+v, want one %s 160x48 stream", probe.Streams, codec)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no addr", Config{}, "empty listen address"},
		{"odd size", Config{Addr: "127.0.0.1:0", Generated: map[string]Generated{"sim": {Source: gradient{100, 50}}}}, "multiples of 8"},
		{"too big", Config{Addr: "127.0.0.1:0", Generated: map[string]Generated{"sim": {Source: gradient{4096, 64}}}}, "at most 2040"},
		{"no source", Config{Addr: "127.0.0.1:0", Generated: map[string]Generated{"sim": {}}}, "no source"},
		{"bad fps", Config{Addr: "127.0.0.1:0", Generated: map[string]Generated{"sim": {Source: gradient{64, 64}, FPS: -1}}}, "fps"},
		{"bad quality", Config{Addr: "127.0.0.1:0", Generated: map[string]Generated{"sim": {Source: gradient{64, 64}, Quality: 101}}}, "quality"},
		{"bad codec", Config{Addr: "127.0.0.1:0", Generated: map[string]Generated{"sim": {Source: gradient{64, 64}, Codec: "vp9"}}}, "codec"},
		{"empty path", Config{Addr: "127.0.0.1:0", Generated: map[string]Generated{"/": {Source: gradient{64, 64}}}}, "empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRestartSamePort: Close and Start again keep the address, also when
// the first Start picked the port.
func TestRestartSamePort(t *testing.T) {
	s, err := New(Config{Addr: "127.0.0.1:0", Generated: map[string]Generated{"sim": {Source: gradient{64, 32}}}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	first := s.Addr()
	if err := s.Start(); err == nil {
		t.Error("second Start while running succeeded")
	}
	for i := 0; i < 3; i++ {
		s.Close()
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		if s.Addr() != first {
			t.Fatalf("restart %d listens on %s, want %s", i, s.Addr(), first)
		}
	}
	s.Close()
	s.Close() // idempotent
}

func TestNTPTime(t *testing.T) {
	cases := []struct {
		t    time.Time
		want uint64
	}{
		{time.Unix(0, 0), 2208988800 << 32},
		{time.Unix(1, 500_000_000), (2208988801 << 32) | 1<<31},
		{time.Unix(0, 250_000_000), (2208988800 << 32) | 1<<30},
	}
	for _, tc := range cases {
		if got := ntpTime(tc.t); got != tc.want {
			t.Errorf("ntpTime(%v) = %#x, want %#x", tc.t, got, tc.want)
		}
	}
}
