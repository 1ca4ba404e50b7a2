package offline

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/runtime/infer"
)

// TestPrepareTargets: when the frame is the input (identity geometry) the
// block errors equal auxue.BlockErrors, the reference computation; a
// relative prediction that is an exact affine map of the true inverse
// depth aligns to zero error everywhere; a letterboxed frame sends its
// ground truth only to the blocks of the content rectangle.
func TestPrepareTargets(t *testing.T) {
	const W, H, f = 32, 16, 4
	rng := rand.New(rand.NewPCG(1, 2))
	gt, depth := make([]float32, W*H), make([]float32, W*H)
	for i := range gt {
		if rng.IntN(3) == 0 {
			gt[i] = 2 + 50*rng.Float32()
		}
		depth[i] = 2 + 50*rng.Float32()
	}
	s := &dataset.Sample{Name: "t", Width: W, Height: H, Sparse: gt}
	c := auxue.InputContract{Height: H, Width: W, Image: auxue.IdentityImage(), Factor: f, MaxDepth: 80, Row: true}
	layout := recordLayout{C: c.Channels(), G: (H / f) * (W / f)}
	rec := layout.newRecord()
	p := &preparer{contract: c, maxDepth: 80}
	dp := infer.DepthPass{Geometry: infer.Fit(W, H, W, H, infer.ResizeStretch), Image: make([]float32, 3*W*H), Depth: depth, Frame: depth}
	if err := p.prepare(s, dp, rec); err != nil {
		t.Fatal(err)
	}
	want, valid := make([]float32, layout.G), make([]bool, layout.G)
	auxue.BlockErrors(depth, gt, H, W, f, want, valid)
	for k := range want {
		if valid[k] != (rec.errs[k] >= 0) || (valid[k] && math.Abs(float64(rec.errs[k]-want[k])) > 1e-5*float64(want[k])) {
			t.Fatalf("block %d: %v (valid %v), want %v", k, rec.errs[k], rec.errs[k] >= 0, want[k])
		}
	}
	// Relative: r = 3/y + 0.2 on the ground-truth pixels.
	r := make([]float32, W*H)
	for i, y := range gt {
		r[i] = 0.2
		if y > 0 {
			r[i] = 3/y + 0.2
		}
	}
	c.Relative = true
	p = &preparer{contract: c, relative: true, maxDepth: 80}
	dp.Depth, dp.Frame = r, r
	if err := p.prepare(s, dp, rec); err != nil {
		t.Fatal(err)
	}
	for k, e := range rec.errs {
		if valid[k] != (e >= 0) || (e > 1e-4) {
			t.Fatalf("relative block %d: error %v after alignment, want 0", k, e)
		}
	}
	if rec.absRel > 1e-4 {
		t.Fatalf("aligned AbsRel %v, want 0", rec.absRel)
	}
	// Letterbox: a 32x8 frame in the 32x16 input fills rows 4..11.
	wide := &dataset.Sample{Name: "w", Width: 32, Height: 8, Sparse: make([]float32, 32*8)}
	for i := range wide.Sparse {
		wide.Sparse[i] = 10
	}
	c.Relative = false
	p = &preparer{contract: c, maxDepth: 80}
	frame := make([]float32, 32*8)
	for i := range frame {
		frame[i] = 12
	}
	dp = infer.DepthPass{Geometry: infer.Fit(32, 8, W, H, infer.ResizeLetterbox), Image: make([]float32, 3*W*H), Depth: depth, Frame: frame}
	if err := p.prepare(wide, dp, rec); err != nil {
		t.Fatal(err)
	}
	for k, e := range rec.errs {
		row := k / (W / f)
		inside := row == 1 || row == 2 // grid rows 1 and 2 cover input rows 4..11
		if inside != (e >= 0) || (inside && e != 2) {
			t.Fatalf("letterbox block %d (grid row %d): error %v", k, row, e)
		}
	}
}
