package simrig

import (
	"fmt"
	"log/slog"

	"github.com/didoedge/didoedge/camera/rtspserver"
)

// Config configures the simulated cameras of StartCamera, StartCameras and
// StartRigCamera; zero fields take the defaults.
type Config struct {
	Addr       string  // RTSP server address (default 127.0.0.1:0)
	FPS        float64 // frame rate (default 15)
	Seed       int64   // world seed (default 1; camera i of the rig uses Seed+i)
	Phases     []Phase // default DefaultScenario()
	Precompute int     // > 0: that many frames per phase rendered up front and looped (Scenario.Precompute)
	Logger     *slog.Logger
	// NewCorruptor makes the corruptor of each camera's scenario (each
	// camera has its own: a corruptor keeps buffers); nil when no phase
	// names a corruption.
	NewCorruptor func() Corruptor
}

func (o *Config) defaults() {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.FPS == 0 {
		o.FPS = 15
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if len(o.Phases) == 0 {
		o.Phases = DefaultScenario()
	}
}

func (o *Config) corruptor() Corruptor {
	if o.NewCorruptor == nil {
		return nil
	}
	return o.NewCorruptor()
}

// Camera is the running simulated camera.
type Camera struct {
	Server   *rtspserver.Server
	Scenario *Scenario
	URL      string
	// Name is the camera's name in the runtime config; Heading its view
	// direction in degrees (positive to the right); Seed its world seed.
	Name    string
	Heading float64
	Seed    int64
}

// MaxCameras bounds the simulated rig of StartCameras.
const MaxCameras = 8

// RigCamera returns the name, heading and seed offset of camera i of the
// simulated rig: front (0°), left (-30°), right (+30°), then cam3.. with
// the headings repeating. Each camera renders its own world (seed + i),
// so that their frames and alerts differ.
func RigCamera(i int) (name string, heading float64, seedOffset int64) {
	names := []string{"front", "left", "right"}
	headings := []float64{0, -30, 30}
	name = fmt.Sprintf("cam%d", i)
	if i < len(names) {
		name = names[i]
	}
	return name, headings[i%3], int64(i)
}

// StartCamera serves the scenario at rtsp://ADDR/sim, M-JPEG.
func StartCamera(o Config, width, height int) (*Camera, error) {
	cams, err := startCameras(o, width, height, 1, func(int) string { return "sim" })
	if err != nil {
		return nil, err
	}
	return cams[0], nil
}

// StartCameras serves n simulated cameras of the rig (RigCamera) from one
// RTSP server, at rtsp://ADDR/<name>; they share the server (Close it
// once through any camera).
func StartCameras(o Config, width, height, n int) ([]*Camera, error) {
	if n < 1 || n > MaxCameras {
		return nil, fmt.Errorf("simulated cameras: %d outside [1, %d]", n, MaxCameras)
	}
	return startCameras(o, width, height, n, func(i int) string { name, _, _ := RigCamera(i); return name })
}

// StartRigCamera serves camera i of the rig (RigCamera) alone on a server
// of its own, at rtsp://ADDR/<name>: closing its server (and starting it
// again, on the same port) kills and restores this camera only.
func StartRigCamera(o Config, width, height, i int) (*Camera, error) {
	if i < 0 || i >= MaxCameras {
		return nil, fmt.Errorf("simulated camera %d outside [0, %d)", i, MaxCameras)
	}
	o.defaults()
	name, heading, off := RigCamera(i)
	sc, err := NewScenarioView(o.Phases, o.FPS, width, height, o.Seed+off, heading, o.corruptor())
	if err != nil {
		return nil, err
	}
	if o.Precompute > 0 {
		if err := sc.Precompute(o.Precompute); err != nil {
			return nil, err
		}
	}
	gen := map[string]rtspserver.Generated{name: {Source: sc, FPS: o.FPS, Quality: 85}}
	srv, err := rtspserver.New(rtspserver.Config{Addr: o.Addr, Logger: o.Logger, Generated: gen})
	if err != nil {
		return nil, fmt.Errorf("simulated camera %s: %w", name, err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("simulated camera %s: %w", name, err)
	}
	return &Camera{Server: srv, Scenario: sc, URL: "rtsp://" + srv.Addr() + "/" + name, Name: name, Heading: heading, Seed: o.Seed + off}, nil
}

func startCameras(o Config, width, height, n int, path func(int) string) ([]*Camera, error) {
	o.defaults()
	gen := map[string]rtspserver.Generated{}
	var cams []*Camera
	for i := range n {
		name, heading, off := RigCamera(i)
		sc, err := NewScenarioView(o.Phases, o.FPS, width, height, o.Seed+off, heading, o.corruptor())
		if err != nil {
			return nil, err
		}
		if o.Precompute > 0 {
			if err := sc.Precompute(o.Precompute); err != nil {
				return nil, err
			}
		}
		gen[path(i)] = rtspserver.Generated{Source: sc, FPS: o.FPS, Quality: 85}
		cams = append(cams, &Camera{Scenario: sc, Name: name, Heading: heading, Seed: o.Seed + off})
	}
	srv, err := rtspserver.New(rtspserver.Config{Addr: o.Addr, Logger: o.Logger, Generated: gen})
	if err != nil {
		return nil, fmt.Errorf("simulated camera: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("simulated camera: %w", err)
	}
	for i, c := range cams {
		c.Server, c.URL = srv, "rtsp://"+srv.Addr()+"/"+path(i)
	}
	return cams, nil
}
