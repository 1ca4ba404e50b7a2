package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/dataset"
)

// runSimRender writes a simulated data set in the KITTI-like layout:
// didoedge sim render --world outdoor|indoor --frames N --size HxW --seed S --out DIR
func runSimRender(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "sim render")
	world := fs.String("world", sim.WorldOutdoor, "world: outdoor or indoor")
	frames := fs.Int("frames", 100, "total number of frames")
	drives := fs.Int("drives", 0, "number of drives (sequences with their own layout); 0 = one per 50 frames, at least 3")
	size := fs.String("size", "192x640", "output size HxW")
	seed := fs.Int64("seed", 1, "data-set seed (each drive derives its own)")
	stride := fs.Int("stride", 1, "sequence frames between two written frames of a drive")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "frames rendered in parallel")
	fog := fs.Float64("fog", 0, "extra fog extinction in 1/m (RGB only)")
	out := fs.String("out", "", "output directory (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sim render: unexpected arguments %q", fs.Args())
	}
	if *out == "" {
		return fmt.Errorf("sim render: --out is required")
	}
	h, w, err := parseSize(*size)
	if err != nil {
		return fmt.Errorf("sim render: --size: %w", err)
	}
	if *frames <= 0 {
		return fmt.Errorf("sim render: --frames must be positive, got %d", *frames)
	}
	if *stride <= 0 {
		return fmt.Errorf("sim render: --stride must be positive, got %d", *stride)
	}
	nd := *drives
	if nd <= 0 {
		nd = min(*frames, max(3, (*frames+49)/50))
	}
	if nd > *frames {
		return fmt.Errorf("sim render: --drives %d exceeds --frames %d", nd, *frames)
	}
	cfg := sim.Config{World: *world, Width: w, Height: h, Seed: *seed, Fog: float32(*fog), Parallelism: 1}
	probe, err := sim.NewRenderer(cfg)
	if err != nil {
		return fmt.Errorf("sim render: %w", err)
	}
	fx, fy, cx, cy := probe.Intrinsics()
	meta := dataset.Meta{
		World: *world, Seed: *seed, Width: w, Height: h,
		Intrinsics: dataset.Intrinsics{Fx: fx, Fy: fy, Cx: cx, Cy: cy},
		DepthScale: dataset.KITTIDepthScale,
		Semantic:   "cityscapes", Sparse: "lidar-hdl64",
	}
	if *world == sim.WorldIndoor {
		meta.Semantic, meta.Sparse = "nyu40", "structured-light"
	}
	splits := dataset.AssignSplits(nd)
	for d := 0; d < nd; d++ {
		count := *frames / nd
		if d < *frames%nd {
			count++
		}
		meta.Drives = append(meta.Drives, dataset.Drive{
			Name: fmt.Sprintf("%s_drive_%04d_sync", *world, d), Seed: dataset.DriveSeed(*seed, d),
			Split: splits[d], Count: count, Stride: *stride,
		})
	}
	env.log.Info("sim render", "world", *world, "frames", *frames, "drives", nd, "size", *size, "seed", *seed, "out", *out)
	err = dataset.Generate(ctx, dataset.GenerateOptions{Dir: *out, Meta: meta, Workers: *workers, Progress: env.stderr},
		simSource{cfg: cfg})
	if err != nil {
		return fmt.Errorf("sim render: %w", err)
	}
	fmt.Fprintf(env.stdout, "wrote %d frames in %d drives to %s\n", *frames, nd, *out)
	return nil
}

// parseSize parses "HxW".
func parseSize(s string) (h, w int, err error) {
	hs, ws, ok := strings.Cut(s, "x")
	if ok {
		h, err = strconv.Atoi(hs)
	}
	if ok && err == nil {
		w, err = strconv.Atoi(ws)
	}
	if !ok || err != nil || h <= 0 || w <= 0 {
		return 0, 0, fmt.Errorf("%q is not HxW with positive integers", s)
	}
	return h, w, nil
}

// simSource adapts the simulator to dataset.Generate: one renderer per
// worker and drive.
type simSource struct{ cfg sim.Config }

func (s simSource) OpenDrive(d dataset.Drive) (dataset.FrameRenderer, error) {
	cfg := s.cfg
	cfg.Seed = d.Seed
	r, err := sim.NewRenderer(cfg)
	if err != nil {
		return nil, err
	}
	return &simDrive{r: r, f: sim.NewFrame(cfg.Width, cfg.Height)}, nil
}

type simDrive struct {
	r *sim.Renderer
	f *sim.Frame
}

func (d *simDrive) RenderFrame(index int, s *dataset.Sample) error {
	if err := d.r.Render(index, d.f); err != nil {
		return err
	}
	f := d.f
	*s = dataset.Sample{Frame: index, Width: f.Width, Height: f.Height,
		RGB: f.RGB, Sparse: f.Sparse, Dense: f.Depth, Semantic: f.Semantic}
	return nil
}
