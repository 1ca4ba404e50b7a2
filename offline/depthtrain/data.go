package depthtrain

import (
	"fmt"
	"math/rand/v2"

	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/dataset/simworld"
	"github.com/didoedge/didoedge/offline/depthnet"
)

// SimSource renders training frames of the simulated outdoor world on the
// fly (through simworld.World, the one adapter of the simulator): drive d uses the world seed dataset.DriveSeed(Seed, d) (the same
// derivation `didoedge sim render` uses, so a data set rendered with another
// --seed holds different drives), frame indices lie in [0, FramesPerDrive).
// Frames are a pure function of (seed, drive, index), so a training run is
// reproducible without caching anything on disk.
type SimSource struct {
	Seed           int64
	Drives         int
	FramesPerDrive int
	Width, Height  int

	world  simworld.World
	drives map[int]*simworld.Drive
	frame  *sim.Frame
}

// NewSimSource checks the configuration.
func NewSimSource(seed int64, drives, framesPerDrive, width, height int) (*SimSource, error) {
	if drives < 1 || framesPerDrive < 1 {
		return nil, fmt.Errorf("sim source: %d drives x %d frames, want at least 1 each", drives, framesPerDrive)
	}
	return &SimSource{Seed: seed, Drives: drives, FramesPerDrive: framesPerDrive, Width: width, Height: height,
		world:  simworld.World{Config: sim.Config{World: sim.WorldOutdoor, Width: width, Height: height}},
		drives: map[int]*simworld.Drive{}, frame: sim.NewFrame(width, height)}, nil
}

// Render returns drive d's frame i (owned by the source until the next call).
func (s *SimSource) Render(d, i int) (*sim.Frame, error) {
	r, ok := s.drives[d]
	if !ok {
		var err error
		if r, err = s.world.Drive(dataset.DriveSeed(s.Seed, d)); err != nil {
			return nil, fmt.Errorf("sim source drive %d: %w", d, err)
		}
		s.drives[d] = r
	}
	if err := r.RenderInto(i, s.frame); err != nil {
		return nil, fmt.Errorf("sim source drive %d frame %d: %w", d, i, err)
	}
	return s.frame, nil
}

// Sample renders a uniformly drawn frame.
func (s *SimSource) Sample(rng *rand.Rand) (*sim.Frame, error) {
	return s.Render(rng.IntN(s.Drives), rng.IntN(s.FramesPerDrive))
}

// NormalizeRGB writes the normalized planar image of an interleaved RGB8
// frame region (columns x0..x0+w, all rows) into dst (3*H*w floats), optionally
// mirrored left-right.
func NormalizeRGB(rgb []uint8, width, height, x0, w int, flip bool, dst []float32) {
	hw := height * w
	var scale, off [3]float32
	for c := 0; c < 3; c++ {
		scale[c] = 1 / (255 * depthnet.Std[c])
		off[c] = depthnet.Mean[c] / depthnet.Std[c]
	}
	for v := 0; v < height; v++ {
		row := rgb[(v*width+x0)*3:]
		for u := 0; u < w; u++ {
			su := u
			if flip {
				su = w - 1 - u
			}
			p := row[su*3 : su*3+3]
			o := v*w + u
			dst[o] = float32(p[0])*scale[0] - off[0]
			dst[hw+o] = float32(p[1])*scale[1] - off[1]
			dst[2*hw+o] = float32(p[2])*scale[2] - off[2]
		}
	}
}

// CropMap copies columns x0..x0+w of a row-major map, optionally mirrored.
func CropMap(src []float32, width, height, x0, w int, flip bool, dst []float32) {
	for v := 0; v < height; v++ {
		row := src[v*width+x0:]
		out := dst[v*w : (v+1)*w]
		for u := range out {
			su := u
			if flip {
				su = w - 1 - u
			}
			out[u] = row[su]
		}
	}
}
