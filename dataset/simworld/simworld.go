package simworld

import (
	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/dataset"
)

// World is the one adapter from the simulated camera (camera/sim) to
// data sets: Generate renders its drives (`didoedge sim render`, the
// demo's calibration frames), and training pools render its frames on the
// fly (offline.SimSource). Drive d of a set with seed S is the world of
// seed DriveSeed(S, d), so a frame is a pure function of (S, d, index).
type World struct {
	// Config is the renderer's; its Seed is replaced by each drive's.
	Config sim.Config
}

// Drive renders the frames of one drive.
type Drive struct {
	r *sim.Renderer
	f *sim.Frame // RenderFrame's frame, made on first use
}

// Drive opens the renderer of the world of seed seed.
func (w World) Drive(seed int64) (*Drive, error) {
	cfg := w.Config
	cfg.Seed = seed
	r, err := sim.NewRenderer(cfg)
	if err != nil {
		return nil, err
	}
	return &Drive{r: r}, nil
}

// OpenDrive implements FrameSource: one renderer per worker and drive.
func (w World) OpenDrive(d dataset.Drive) (dataset.FrameRenderer, error) { return w.Drive(d.Seed) }

// Meta describes a data set of the world: size, intrinsics, depth
// encoding, the semantic and sparse ground-truth kinds; Drives are the
// caller's.
func (w World) Meta(seed int64) (dataset.Meta, error) {
	cfg := w.Config
	cfg.Seed = seed
	probe, err := sim.NewRenderer(cfg)
	if err != nil {
		return dataset.Meta{}, err
	}
	fx, fy, cx, cy := probe.Intrinsics()
	m := dataset.Meta{World: cfg.World, Seed: seed, Width: cfg.Width, Height: cfg.Height,
		Intrinsics: dataset.Intrinsics{Fx: fx, Fy: fy, Cx: cx, Cy: cy}, DepthScale: dataset.KITTIDepthScale,
		Semantic: "cityscapes", Sparse: "lidar-hdl64"}
	if cfg.Camera != "" && cfg.Camera != sim.CameraKITTI {
		m.Camera = cfg.Camera
	}
	if cfg.World == sim.WorldIndoor {
		m.Semantic, m.Sparse = "nyu40", "structured-light"
	}
	return m, nil
}

// RenderInto renders frame index of the drive into f.
func (d *Drive) RenderInto(index int, f *sim.Frame) error { return d.r.Render(index, f) }

// RenderFrame implements FrameRenderer: the sample aliases the drive's
// frame until the next call.
func (d *Drive) RenderFrame(index int, s *dataset.Sample) error {
	if d.f == nil {
		cfg := d.r.Config()
		d.f = sim.NewFrame(cfg.Width, cfg.Height)
	}
	if err := d.r.Render(index, d.f); err != nil {
		return err
	}
	f := d.f
	*s = dataset.Sample{Frame: index, Width: f.Width, Height: f.Height, RGB: f.RGB, Sparse: f.Sparse, Dense: f.Depth, Semantic: f.Semantic}
	return nil
}
