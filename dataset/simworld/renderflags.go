package simworld

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime"

	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/dataset"
)

// RenderFlags are the flags of `didoedge sim render`: a simulated data set
// in the KITTI-like layout.
type RenderFlags struct {
	World, Size, Out, Camera        string
	Frames, Drives, Stride, Workers int
	Seed                            int64
	Fog                             float64
}

// AddFlags declares the flags on fs.
func (f *RenderFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.World, "world", sim.WorldOutdoor, "world: outdoor or indoor")
	fs.IntVar(&f.Frames, "frames", 100, "total number of frames")
	fs.IntVar(&f.Drives, "drives", 0, "number of drives (sequences with their own layout); 0 = one per 50 frames, at least 3")
	fs.StringVar(&f.Camera, "camera", sim.CameraKITTI, "simulated camera: kitti (the training camera) or newcam (another lens, colour response, noise and 16:9 sensor on the same roads)")
	fs.StringVar(&f.Size, "size", "", "output size HxW (default: the camera's, 192x640 for kitti, 360x640 for newcam)")
	fs.Int64Var(&f.Seed, "seed", 1, "data-set seed (each drive derives its own)")
	fs.IntVar(&f.Stride, "stride", 1, "sequence frames between two written frames of a drive")
	fs.IntVar(&f.Workers, "workers", runtime.GOMAXPROCS(0), "frames rendered in parallel")
	fs.Float64Var(&f.Fog, "fog", 0, "extra fog extinction in 1/m (RGB only)")
	fs.StringVar(&f.Out, "out", "", "output directory (required)")
}

// Render writes the data set the flags describe (Generate through
// World) with a progress bar on progress and a closing line on w.
// Errors name the flag.
func (f *RenderFlags) Render(ctx context.Context, w, progress io.Writer, log *slog.Logger) error {
	if f.Out == "" {
		return fmt.Errorf("sim render: --out is required")
	}
	cam, err := sim.LookupCamera(f.Camera)
	if err != nil {
		return fmt.Errorf("sim render: --camera: %w", err)
	}
	h, wd := cam.DefaultSize()
	if f.Size != "" {
		if h, wd, err = sim.ParseSize(f.Size); err != nil {
			return fmt.Errorf("sim render: --size: %w", err)
		}
	}
	if f.Frames <= 0 {
		return fmt.Errorf("sim render: --frames must be positive, got %d", f.Frames)
	}
	if f.Stride <= 0 {
		return fmt.Errorf("sim render: --stride must be positive, got %d", f.Stride)
	}
	nd := f.Drives
	if nd <= 0 {
		nd = min(f.Frames, max(3, (f.Frames+49)/50))
	}
	if nd > f.Frames {
		return fmt.Errorf("sim render: --drives %d exceeds --frames %d", nd, f.Frames)
	}
	src := World{Config: sim.Config{World: f.World, Width: wd, Height: h, Fog: float32(f.Fog), Parallelism: 1, Camera: f.Camera}}
	meta, err := src.Meta(f.Seed)
	if err != nil {
		return fmt.Errorf("sim render: %w", err)
	}
	if meta.Drives, err = dataset.SplitDrives(f.World, f.Seed, f.Frames, nd, f.Stride); err != nil {
		return fmt.Errorf("sim render: %w", err)
	}
	log.Info("sim render", "world", f.World, "camera", cam.Name, "frames", f.Frames, "drives", nd, "size", fmt.Sprintf("%dx%d", h, wd), "seed", f.Seed, "out", f.Out)
	if err := dataset.Generate(ctx, dataset.GenerateOptions{Dir: f.Out, Meta: meta, Workers: f.Workers, Progress: progress}, src); err != nil {
		return fmt.Errorf("sim render: %w", err)
	}
	_, err = fmt.Fprintf(w, "wrote %d frames in %d drives to %s\n", f.Frames, nd, f.Out)
	return err
}
