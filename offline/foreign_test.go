package offline

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/offline/depthtrain"
	"github.com/didoedge/didoedge/runtime/infer"
)

// referenceDepth opens models/depth.onnx with its spec.
func referenceDepth(t *testing.T) (model, spec string) {
	t.Helper()
	return filepath.Join("..", "models", "depth.onnx"), filepath.Join("..", "models", "depth.yaml")
}

// openDepth opens a depth model alone through infer.Models.
func openDepth(t *testing.T, model, spec string) *infer.Models {
	t.Helper()
	s, err := ReadSpec(spec, infer.KindDepth)
	if err != nil {
		t.Fatal(err)
	}
	m, err := infer.OpenModels(context.Background(), infer.ModelsConfig{Depth: model, DepthSpec: s}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestForeignNHWCModelMatchesReference: the metric model built by
// python3-onnx around the reference graph, with an NHWC BGR input
// normalized by its spec and the depth as its second, rank-4 NHWC output,
// gives through infer.Models the reference model's depth on the same frame
// (the spec's layout, channel order and normalization undo the wrapper's).
func TestForeignNHWCModelMatchesReference(t *testing.T) {
	refModel, refSpec := referenceDepth(t)
	model, spec := testmodels.Foreign(t, "nhwc", refModel, t.TempDir())
	ref, foreign := openDepth(t, refModel, refSpec), openDepth(t, model, spec)
	src, err := depthtrain.NewSimSource(77, 1, 5, 640, 192)
	if err != nil {
		t.Fatal(err)
	}
	f, err := src.Render(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := ref.RunDepth(ctx, f.RGB, 640, 192)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]float32(nil), a.Frame...)
	b, err := foreign.RunDepth(ctx, f.RGB, 640, 192)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i, v := range want {
		worst = math.Max(worst, math.Abs(float64(b.Frame[i]-v))/float64(v))
	}
	if worst > 1e-4 {
		t.Fatalf("NHWC model depth differs from the reference by %v (relative)", worst)
	}
	if foreign.Relative() {
		t.Fatal("metric model read as relative")
	}
}

// TestForeignMiDaSModelIsAffineInInverseDepth: the MiDaS-like model's
// output on a frame (square input, rank-3 output, [0,255] scaling) is an
// affine map of the reference's inverse depth: aligning it to the
// reference's own depth (least squares in inverse depth) recovers 1/A and
// -B/A and leaves a small residual; the two pass through different
// resamplings (640x192 -> 256x256 -> 640x192), so not exactly.
func TestForeignMiDaSModelIsAffineInInverseDepth(t *testing.T) {
	refModel, refSpec := referenceDepth(t)
	model, spec := testmodels.Foreign(t, "midas", refModel, t.TempDir())
	ref, foreign := openDepth(t, refModel, refSpec), openDepth(t, model, spec)
	if !foreign.Relative() {
		t.Fatal("relative model read as metric")
	}
	src, err := depthtrain.NewSimSource(78, 1, 5, 640, 192)
	if err != nil {
		t.Fatal(err)
	}
	f, err := src.Render(0, 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := ref.RunDepth(ctx, f.RGB, 640, 192)
	if err != nil {
		t.Fatal(err)
	}
	d := append([]float32(nil), a.Frame...)
	b, err := foreign.RunDepth(ctx, f.RGB, 640, 192)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Frame) != len(d) || len(b.Depth) != 256*256 {
		t.Fatalf("maps of %d and %d values, want the frame's %d and the input's %d", len(b.Frame), len(b.Depth), len(d), 256*256)
	}
	al, err := metrics.AlignInverseDepth(b.Frame, d)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(al.S*testmodels.MiDaSA-1) > 0.05 || math.Abs(al.T+testmodels.MiDaSB/testmodels.MiDaSA) > 0.01 {
		t.Fatalf("alignment s %v t %v, want about %v and %v", al.S, al.T, 1/testmodels.MiDaSA, -testmodels.MiDaSB/testmodels.MiDaSA)
	}
}
