package main

import (
	"context"
	"fmt"
	"net"
	"strconv"

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
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	h, w, err := parseSize(*size)
	if err != nil {
		return fmt.Errorf("sim serve: --size: %w", err)
	}
	src, err := sim.NewRGBSource(sim.Config{World: *world, Width: w, Height: h, Seed: *seed})
	if err != nil {
		return fmt.Errorf("sim serve: %w", err)
	}
	cfg := rtspserver.Config{
		Addr:      *addr,
		Generated: map[string]rtspserver.Generated{"sim": {Source: src, FPS: *fps, Quality: *quality, Codec: *codec}},
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
