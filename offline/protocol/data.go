package protocol

import (
	"context"
	"fmt"

	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/dataset"
)

// frame is one rendered test frame: interleaved RGB8, sparse LiDAR ground
// truth (0 = none, never on the sky) and semantics (sky = metrics.SkyClass).
type frame struct {
	rgb    []uint8
	sparse []float32
	sem    []uint8
}

// renderFrames renders n frames of world, spread over drives drives of the
// world seed (drive d uses dataset.DriveSeed(seed, d), as `didoedge sim
// render` does). Frame k is drive k%drives, index 23*(k/drives) so that
// consecutive picks of one drive are far apart.
func renderFrames(ctx context.Context, world string, seed int64, drives, n, w, h int) ([]frame, error) {
	rs := make([]*sim.Renderer, drives)
	f := sim.NewFrame(w, h)
	out := make([]frame, 0, n)
	for k := 0; k < n; k++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d := k % drives
		if rs[d] == nil {
			r, err := sim.NewRenderer(sim.Config{World: world, Width: w, Height: h, Seed: dataset.DriveSeed(seed, d)})
			if err != nil {
				return nil, fmt.Errorf("render %s drive %d: %w", world, d, err)
			}
			rs[d] = r
		}
		if err := rs[d].Render(23*(k/drives), f); err != nil {
			return nil, fmt.Errorf("render %s drive %d frame %d: %w", world, d, k, err)
		}
		out = append(out, frame{rgb: append([]uint8(nil), f.RGB...), sparse: append([]float32(nil), f.Sparse...),
			sem: append([]uint8(nil), f.Semantic...)})
	}
	return out, nil
}
