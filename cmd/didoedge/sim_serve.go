package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/didoedge/didoedge/camera/rtspserver"
	"github.com/didoedge/didoedge/camera/sim"
)

// runSimServe serves the simulated world over RTSP at rtsp://ADDR/sim
// (M-JPEG or H.264) and relays streams published to any other path.
func runSimServe(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "sim serve")
	addr := fs.String("addr", "127.0.0.1:8554", "RTSP listen address")
	world := fs.String("world", sim.WorldOutdoor, "world: outdoor or indoor")
	fps := fs.Float64("fps", 15, "frame rate")
	size := fs.String("size", fmt.Sprintf("%dx%d", sim.DefaultHeight, sim.DefaultWidth), "frame size HxW (multiples of 8)")
	seed := fs.Int64("seed", 1, "world seed")
	quality := fs.Int("quality", 85, "JPEG quality 1..100 (mjpeg)")
	codec := fs.String("codec", "mjpeg", "mjpeg (pure Go) or h264 (libx264 through libavcodec)")
	udpPort := fs.Int("udp-port", 0, "also serve RTP/RTCP over UDP on this even port and the next (0: TCP only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sim serve: unexpected argument %q", fs.Arg(0))
	}
	h, w, err := parseHxW(*size)
	if err != nil {
		return fmt.Errorf("sim serve: --size: %w", err)
	}
	r, err := sim.NewRenderer(sim.Config{World: *world, Width: w, Height: h, Seed: *seed})
	if err != nil {
		return fmt.Errorf("sim serve: %w", err)
	}
	cfg := rtspserver.Config{
		Addr:      *addr,
		Generated: map[string]rtspserver.Generated{"sim": {Source: &simFrames{r: r, f: sim.NewFrame(w, h)}, FPS: *fps, Quality: *quality, Codec: *codec}},
		Logger:    env.log,
	}
	if *udpPort != 0 {
		host, _, err := net.SplitHostPort(*addr)
		if err != nil {
			return fmt.Errorf("sim serve: --addr %q: %w", *addr, err)
		}
		if *udpPort < 0 || *udpPort%2 != 0 || *udpPort > 65534 {
			return fmt.Errorf("sim serve: --udp-port %d must be even and below 65535", *udpPort)
		}
		cfg.UDPRTPAddr = net.JoinHostPort(host, strconv.Itoa(*udpPort))
		cfg.UDPRTCPAddr = net.JoinHostPort(host, strconv.Itoa(*udpPort+1))
	}
	srv, err := rtspserver.New(cfg)
	if err != nil {
		return fmt.Errorf("sim serve: %w", err)
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("sim serve: %w", err)
	}
	defer srv.Close()
	fmt.Fprintf(env.stdout, "serving the %s world at rtsp://%s/sim (%s %dx%d, %g fps); other paths accept RTSP publishers\n",
		*world, srv.Addr(), *codec, w, h, *fps)
	<-ctx.Done()
	return nil
}

// parseHxW parses "192x640" into height 192 and width 640.
func parseHxW(s string) (h, w int, err error) {
	hs, ws, ok := strings.Cut(strings.ToLower(s), "x")
	if !ok {
		return 0, 0, fmt.Errorf("%q is not HxW", s)
	}
	if h, err = strconv.Atoi(hs); err != nil || h <= 0 {
		return 0, 0, fmt.Errorf("%q: bad height", s)
	}
	if w, err = strconv.Atoi(ws); err != nil || w <= 0 {
		return 0, 0, fmt.Errorf("%q: bad width", s)
	}
	return h, w, nil
}

// simFrames adapts the renderer to rtspserver.FrameSource; the server calls
// it from one goroutine.
type simFrames struct {
	r *sim.Renderer
	f *sim.Frame
}

func (s *simFrames) Size() (int, int) { return s.f.Width, s.f.Height }

func (s *simFrames) Render(index int, rgb []uint8) error {
	if err := s.r.Render(index, s.f); err != nil {
		return err
	}
	copy(rgb, s.f.RGB)
	return nil
}
