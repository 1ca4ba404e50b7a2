package dataset

import (
	"fmt"

	"github.com/didoedge/didoedge/camera/sim"
)

// SimWorld is the one adapter from the simulated camera (camera/sim) to
// data sets: Generate renders its drives (`didoedge sim render`, the
// demo's calibration frames), and training pools render its frames on the
// fly (offline.SimSource). Drive d of a set with seed S is the world of
// seed DriveSeed(S, d), so a frame is a pure function of (S, d, index).
type SimWorld struct {
	// Config is the renderer's; its Seed is replaced by each drive's.
	Config sim.Config
}

// SimDrive renders the frames of one drive.
type SimDrive struct {
	r *sim.Renderer
	f *sim.Frame // RenderFrame's frame, made on first use
}

// Drive opens the renderer of the world of seed seed.
func (w SimWorld) Drive(seed int64) (*SimDrive, error) {
	cfg := w.Config
	cfg.Seed = seed
	r, err := sim.NewRenderer(cfg)
	if err != nil {
		return nil, err
	}
	return &SimDrive{r: r}, nil
}

// OpenDrive implements FrameSource: one renderer per worker and drive.
func (w SimWorld) OpenDrive(d Drive) (FrameRenderer, error) { return w.Drive(d.Seed) }

// Meta describes a data set of the world: size, intrinsics, depth
// encoding, the semantic and sparse ground-truth kinds; Drives are the
// caller's.
func (w SimWorld) Meta(seed int64) (Meta, error) {
	cfg := w.Config
	cfg.Seed = seed
	probe, err := sim.NewRenderer(cfg)
	if err != nil {
		return Meta{}, err
	}
	fx, fy, cx, cy := probe.Intrinsics()
	m := Meta{World: cfg.World, Seed: seed, Width: cfg.Width, Height: cfg.Height,
		Intrinsics: Intrinsics{Fx: fx, Fy: fy, Cx: cx, Cy: cy}, DepthScale: KITTIDepthScale,
		Semantic: "cityscapes", Sparse: "lidar-hdl64"}
	if cfg.Camera != "" && cfg.Camera != sim.CameraKITTI {
		m.Camera = cfg.Camera
	}
	if cfg.World == sim.WorldIndoor {
		m.Semantic, m.Sparse = "nyu40", "structured-light"
	}
	return m, nil
}

// SplitDrives spreads frames over drives (the first frames%drives get one
// more) named <world>_drive_%04d_sync, with splits from AssignSplits and
// seeds from DriveSeed(seed, d).
func SplitDrives(world string, seed int64, frames, drives, stride int) ([]Drive, error) {
	if frames < 1 || drives < 1 || drives > frames {
		return nil, fmt.Errorf("%d frames over %d drives: want 1 <= drives <= frames", frames, drives)
	}
	splits := AssignSplits(drives)
	out := make([]Drive, drives)
	for d := range out {
		count := frames / drives
		if d < frames%drives {
			count++
		}
		out[d] = Drive{Name: fmt.Sprintf("%s_drive_%04d_sync", world, d), Seed: DriveSeed(seed, d),
			Split: splits[d], Count: count, Stride: stride}
	}
	return out, nil
}

// RenderInto renders frame index of the drive into f.
func (d *SimDrive) RenderInto(index int, f *sim.Frame) error { return d.r.Render(index, f) }

// RenderFrame implements FrameRenderer: the sample aliases the drive's
// frame until the next call.
func (d *SimDrive) RenderFrame(index int, s *Sample) error {
	if d.f == nil {
		cfg := d.r.Config()
		d.f = sim.NewFrame(cfg.Width, cfg.Height)
	}
	if err := d.r.Render(index, d.f); err != nil {
		return err
	}
	f := d.f
	*s = Sample{Frame: index, Width: f.Width, Height: f.Height, RGB: f.RGB, Sparse: f.Sparse, Dense: f.Depth, Semantic: f.Semantic}
	return nil
}
