package rtspserver

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/didoedge/didoedge/camera/sim"
)

// SimFlags are the flags of `didoedge sim serve`: the simulated world at
// rtsp://ADDR/sim.
type SimFlags struct {
	Addr, World, Size, Codec, Camera string
	FPS                              float64
	Seed                             int64
	Quality, UDPPort                 int
}

// AddFlags declares the flags on fs.
func (f *SimFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Addr, "addr", "127.0.0.1:8554", "RTSP listen address")
	fs.StringVar(&f.World, "world", sim.WorldOutdoor, "world: outdoor or indoor")
	fs.Float64Var(&f.FPS, "fps", 15, "frame rate")
	fs.StringVar(&f.Camera, "camera", sim.CameraKITTI, "simulated camera: kitti (the training camera) or newcam (the same roads through another camera)")
	fs.StringVar(&f.Size, "size", "", "frame size HxW (multiples of 8; default: the camera's, 192x640 for kitti, 360x640 for newcam)")
	fs.Int64Var(&f.Seed, "seed", 1, "world seed")
	fs.IntVar(&f.Quality, "quality", 85, "JPEG quality 1..100 (mjpeg)")
	fs.StringVar(&f.Codec, "codec", "mjpeg", "mjpeg (pure Go) or h264 (libx264 through libavcodec)")
	fs.IntVar(&f.UDPPort, "udp-port", 0, "also serve RTP/RTCP over UDP on this even port and the next (0: TCP only)")
}

// Config is the server the flags describe, the simulated world at path
// "sim"; errors name the flag.
func (f *SimFlags) Config(log *slog.Logger) (Config, error) {
	h, w, err := f.size()
	if err != nil {
		return Config{}, err
	}
	src, err := sim.NewRGBSource(sim.Config{World: f.World, Width: w, Height: h, Seed: f.Seed, Camera: f.Camera})
	if err != nil {
		return Config{}, fmt.Errorf("sim serve: %w", err)
	}
	cfg := Config{
		Addr:      f.Addr,
		Generated: map[string]Generated{"sim": {Source: src, FPS: f.FPS, Quality: f.Quality, Codec: f.Codec}},
		Logger:    log,
	}
	if f.UDPPort != 0 {
		host, _, err := net.SplitHostPort(f.Addr)
		if err != nil {
			return Config{}, fmt.Errorf("sim serve: --addr %q: %w", f.Addr, err)
		}
		if f.UDPPort < 0 || f.UDPPort%2 != 0 || f.UDPPort > 65534 {
			return Config{}, fmt.Errorf("sim serve: --udp-port %d must be even and below 65535", f.UDPPort)
		}
		cfg.UDPRTPAddr = net.JoinHostPort(host, strconv.Itoa(f.UDPPort))
		cfg.UDPRTCPAddr = net.JoinHostPort(host, strconv.Itoa(f.UDPPort+1))
	}
	return cfg, nil
}

// size is the --size flag, or the --camera's default size.
func (f *SimFlags) size() (h, w int, err error) {
	cam, err := sim.LookupCamera(f.Camera)
	if err != nil {
		return 0, 0, fmt.Errorf("sim serve: --camera: %w", err)
	}
	if f.Size == "" {
		h, w = cam.DefaultSize()
		return h, w, nil
	}
	if h, w, err = sim.ParseSize(f.Size); err != nil {
		return 0, 0, fmt.Errorf("sim serve: --size: %w", err)
	}
	return h, w, nil
}

// Describe is the line `didoedge sim serve` prints once s, started with
// the flags, serves.
func (f *SimFlags) Describe(s *Server) string {
	h, w, _ := f.size()
	cam := f.Camera
	if cam == "" {
		cam = sim.CameraKITTI
	}
	return fmt.Sprintf("serving the %s world through the %s camera at rtsp://%s/sim (%s %dx%d, %g fps); other paths accept RTSP publishers",
		f.World, cam, s.Addr(), f.Codec, w, h, f.FPS)
}
