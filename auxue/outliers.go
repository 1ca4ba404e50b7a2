package auxue

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// auxImageChannels is the number of leading aux_features channels that
// describe the frame's content (normalized RGB and depth/80); the row
// coordinate and decoder features after them are left as they are by the
// layout outliers, so an outlier keeps the geometry of a real frame.
const auxImageChannels = 4

// OutlierKind names a synthetic layout outlier made from a training frame.
type OutlierKind string

// The layout outliers. Each keeps every local pattern of a real outdoor
// frame and breaks only where it sits, so the DIDO head can lower its
// evidence on them only by looking beyond the patch.
const (
	// OutlierFlip turns the frame's content upside down (road on top, sky
	// at the bottom) under the unchanged row coordinate.
	OutlierFlip OutlierKind = "flip"
	// OutlierTiles cuts the content into a 4 x 4 grid of tiles and
	// permutes them.
	OutlierTiles OutlierKind = "tiles"
)

// ParseOutlierKinds parses a comma-separated list of outlier kinds.
func ParseOutlierKinds(s string) ([]OutlierKind, error) {
	var out []OutlierKind
	for _, f := range strings.Split(s, ",") {
		switch k := OutlierKind(strings.TrimSpace(f)); k {
		case OutlierFlip, OutlierTiles:
			out = append(out, k)
		case "":
		default:
			return nil, fmt.Errorf("outlier kind %q: want %q or %q", k, OutlierFlip, OutlierTiles)
		}
	}
	return out, nil
}

// MakeOutlier rewrites the content channels (the first four: image and
// depth) of one frame's features (c x h x w, in place) as the outlier kind;
// scratch holds h*w floats. Tiles cover the largest multiple of the 4 x 4
// grid; rows and columns beyond it stay in place. The caller marks the
// frame as without ground truth.
func MakeOutlier(kind OutlierKind, feats []float32, c, h, w int, rng *rand.Rand, scratch []float32) {
	makeOutlier(kind, feats, c, h, w, func(ch int) bool { return ch < auxImageChannels }, rng, scratch)
}

// makeOutlier rewrites the channels for which content is true.
func makeOutlier(kind OutlierKind, feats []float32, c, h, w int, content func(int) bool, rng *rand.Rand, scratch []float32) {
	const grid = 4
	var perm []int
	if kind == OutlierTiles {
		perm = rng.Perm(grid * grid)
	}
	th, tw := h/grid, w/grid
	hw := h * w
	for ch := 0; ch < c; ch++ {
		if !content(ch) {
			continue
		}
		m := feats[ch*hw : (ch+1)*hw]
		copy(scratch, m)
		switch kind {
		case OutlierFlip:
			for y := 0; y < h; y++ {
				copy(m[y*w:(y+1)*w], scratch[(h-1-y)*w:(h-y)*w])
			}
		case OutlierTiles:
			for t, src := range perm {
				ty, tx, sy, sx := t/grid*th, t%grid*tw, src/grid*th, src%grid*tw
				for y := 0; y < th; y++ {
					copy(m[(ty+y)*w+tx:(ty+y)*w+tx+tw], scratch[(sy+y)*w+sx:(sy+y)*w+sx+tw])
				}
			}
		}
	}
}

// MaybeOutlier turns one batch item into a layout outlier with probability
// frac: a kind drawn from kinds rewrites its features (c x h x w) and every
// block is marked as without ground truth (valid false, bin -1), so only
// the unlabeled-block regularizer of DIDO applies to it. It reports
// whether it did.
func MaybeOutlier(rng *rand.Rand, frac float64, kinds []OutlierKind, feats []float32, c, h, w int, valid []bool, bins []int32, scratch []float32) bool {
	if frac <= 0 || len(kinds) == 0 || rng.Float64() >= frac {
		return false
	}
	MakeOutlier(kinds[rng.IntN(len(kinds))], feats, c, h, w, rng, scratch)
	clear(valid)
	for i := range bins {
		bins[i] = -1
	}
	return true
}

// MaybeOutlierKeep is MaybeOutlier for an input contract whose every
// channel but keep describes the frame's content (keep: the row
// coordinate, InputContract.RowChannel; -1 rewrites all): the main
// model's feature channels after the row coordinate move with the image,
// as the main model's features of a flipped or tiled frame would. With
// channels image, depth and row only, it draws and rewrites exactly what
// MaybeOutlier does.
func MaybeOutlierKeep(rng *rand.Rand, frac float64, kinds []OutlierKind, feats []float32, c, h, w, keep int, valid []bool, bins []int32, scratch []float32) bool {
	if frac <= 0 || len(kinds) == 0 || rng.Float64() >= frac {
		return false
	}
	makeOutlier(kinds[rng.IntN(len(kinds))], feats, c, h, w, func(ch int) bool { return ch != keep }, rng, scratch)
	clear(valid)
	for i := range bins {
		bins[i] = -1
	}
	return true
}
