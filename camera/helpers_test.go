package camera_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/camera/rtspserver"
	"github.com/didoedge/didoedge/internal/testnet"
)

// freeAddr returns a 127.0.0.1 address whose port was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
}

// freeUDPPair returns 127.0.0.1 addresses of an even UDP port and the one
// above it, both free a moment ago (RTP/RTCP pair).
func freeUDPPair(t testing.TB) (string, string) {
	t.Helper()
	for i := 0; i < 50; i++ {
		a, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := a.LocalAddr().(*net.UDPAddr).Port
		a.Close()
		if port%2 == 1 {
			port--
		}
		rtp, err1 := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		rtcp, err2 := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port+1))
		if rtp != nil {
			rtp.Close()
		}
		if rtcp != nil {
			rtcp.Close()
		}
		if err1 == nil && err2 == nil {
			return fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("127.0.0.1:%d", port+1)
		}
	}
	t.Fatal("no free UDP port pair")
	return "", ""
}

// pattern is a smooth, static test picture: gradients a codec reproduces
// closely, plus large flat blocks that make a misplaced picture obvious.
type pattern struct{ w, h int }

func (p pattern) Size() (int, int) { return p.w, p.h }

func (p pattern) Render(_ int, rgb []uint8) error {
	fillPattern(rgb, p.w, p.h)
	return nil
}

func fillPattern(rgb []uint8, w, h int) {
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			i := 3 * (y*w + x)
			r := uint8(40 + 170*x/w)
			g := uint8(40 + 170*y/h)
			b := uint8(90)
			if (x/(w/4))%2 == (y/(h/2))%2 {
				b = 190
			}
			rgb[i], rgb[i+1], rgb[i+2] = r, g, b
		}
	}
}

// meanAbsDiff is the mean absolute difference over all samples.
func meanAbsDiff(a, b []uint8) float64 {
	if len(a) != len(b) {
		return 255
	}
	var s int64
	for i := range a {
		d := int64(a[i]) - int64(b[i])
		if d < 0 {
			d = -d
		}
		s += d
	}
	return float64(s) / float64(len(a))
}

// startServer starts an in-process server on a free 127.0.0.1 port.
func startServer(t testing.TB, gen map[string]rtspserver.Generated) *rtspserver.Server {
	t.Helper()
	srv, err := rtspserver.New(rtspserver.Config{Addr: freeAddr(t), Generated: gen, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// needTool skips when a Debian tool the test drives is missing.
func needTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not installed (scripts/deps.sh installs it): %v", name, err)
	}
	return p
}

// startFFmpeg runs ffmpeg with args until the test ends, then kills it by PID.
func startFFmpeg(t testing.TB, args ...string) {
	t.Helper()
	bin := needTool(t, "ffmpeg")
	cmd := exec.Command(bin, append([]string{"-hide_banner", "-loglevel", "error", "-nostdin"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("ffmpeg stderr: %s", stderr.String())
		}
	})
}

// runSource starts src.Run in the background until the test ends.
func runSource(t testing.TB, src *camera.RTSPSource) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { src.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return cancel
}

// nextFrame waits at most d for a frame.
func nextFrame(t testing.TB, src camera.Source, f *camera.Frame, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := src.Next(ctx, f); err != nil {
		return fmt.Errorf("no frame within %v: %w", d, err)
	}
	return nil
}

// quietLogger discards logs unless CAMERA_TEST_LOG is set.
func quietLogger() *slog.Logger {
	if os.Getenv("CAMERA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
