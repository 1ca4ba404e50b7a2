package infer

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/internal/testmodels"
)

// conventionImage is a w x h RGB8 frame whose colour varies with the row
// and the column, constant over blocks of b x b pixels (so that a frame b
// times the input's size fits into it exactly).
func conventionImage(w, h, b int) []uint8 {
	rgb := make([]uint8, 3*w*h)
	for y := range h {
		for x := range w {
			bx, by := x/b, y/b
			o := 3 * (y*w + x)
			rgb[o], rgb[o+1], rgb[o+2] = uint8(7*by+3*bx), uint8(255-5*by), uint8(11*bx%256)
		}
	}
	return rgb
}

// openConvention opens a convention model (testmodels.Convention) alone
// with the spec text given.
func openConvention(t *testing.T, model, specText string) *Models {
	t.Helper()
	s, err := ParseIOSpec([]byte(specText), "convention.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := OpenModels(context.Background(), ModelsConfig{Depth: model, DepthSpec: s, DepthSpecFile: "convention.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestConventionModels: each published convention, built as a tiny model
// by python3-onnx that writes the known depth d (testmodels.ConventionDepth)
// in its own form, reads back through its spec lines as d in metres (or,
// relative, as the model's raw relative inverse depth), on the input grid.
func TestConventionModels(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for _, kind := range testmodels.Conventions {
		t.Run(kind, func(t *testing.T) {
			model, specPath := testmodels.Convention(t, kind, dir)
			_ = specPath
			m := openConvention(t, model, testmodels.ConventionSpecs[kind])
			iw, ih := testmodels.ConventionSize(kind)
			b := 1
			if kind == "canonical" {
				// The frame is twice the input; fx of the frame's pixels
				// halves into the input: f_input = 100 * 64/128 = 50.
				b = 2
				if err := m.SetFocal(2*testmodels.ConvFocalInput, 2*iw); err != nil {
					t.Fatal(err)
				}
			}
			fw, fh := b*iw, b*ih
			rgb := conventionImage(fw, fh, b)
			dp, err := m.RunDepth(ctx, rgb, fw, fh)
			if err != nil {
				t.Fatal(err)
			}
			tol := 2e-5
			if kind == "half" {
				tol = 2e-3 // float16 input (2^-11) and output (2^-11)
			}
			worst := 0.0
			for y := range ih {
				for x := range iw {
					o := 3 * (b*y*fw + b*x)
					d := testmodels.ConventionDepth(rgb[o], rgb[o+1], rgb[o+2])
					want := d
					if m.Relative() {
						want = testmodels.MiDaSA/d + testmodels.MiDaSB
					}
					got := float64(dp.Depth[y*iw+x])
					worst = math.Max(worst, math.Abs(got-want)/math.Abs(want))
				}
			}
			if worst > tol {
				t.Fatalf("read-out differs from the closed form by %.3g (relative), limit %g", worst, tol)
			}
			if kind == "multiscale" {
				if got := m.DepthSession().Spec().Depth.Name; got != "depth_s1" {
					t.Fatalf("depth output chosen: %q, want the finest, depth_s1", got)
				}
			}
		})
	}
}

// TestMultiScaleNamedOutput: naming a coarser output of a multi-scale
// model reads that one (depth_s2 = pool2(d) + 1), upsampled to the
// frame; on a uniform frame every pixel is d + 1.
func TestMultiScaleNamedOutput(t *testing.T) {
	model, _ := testmodels.Convention(t, "multiscale", t.TempDir())
	m := openConvention(t, model, "input: {name: image, height: 32, width: 64}\ndepth: {name: depth_s2, meaning: metric_depth}\n")
	rgb := make([]uint8, 3*64*32)
	for i := range rgb {
		rgb[i] = uint8(40 + i%3*50)
	}
	dp, err := m.RunDepth(context.Background(), rgb, 64, 32)
	if err != nil {
		t.Fatal(err)
	}
	want := testmodels.ConventionDepth(40, 90, 140) + 1
	for i, v := range dp.Frame {
		if math.Abs(float64(v)-want) > 1e-5*want {
			t.Fatalf("pixel %d: %v, want %v", i, v, want)
		}
	}
}

// TestNegativeDisparityDirection: PyDNet-like negative disparity declared
// as relative with scale -1 reads larger = nearer (r = 0.3/d), the
// direction every relative read-out assumes; without the sign the
// read-out grows with depth.
func TestNegativeDisparityDirection(t *testing.T) {
	model, _ := testmodels.Convention(t, "negdisp", t.TempDir())
	rgb := conventionImage(64, 32, 1)
	for _, tc := range []struct {
		spec string
		sign float64
	}{
		{"input: {name: image, height: 32, width: 64}\ndepth: {name: disp, meaning: relative, scale: -1}\n", 1},
		{"input: {name: image, height: 32, width: 64}\ndepth: {name: disp, meaning: relative}\n", -1},
	} {
		m := openConvention(t, model, tc.spec)
		dp, err := m.RunDepth(context.Background(), rgb, 64, 32)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range dp.Frame {
			o := 3 * i
			want := tc.sign * testmodels.ConvNegDisp / testmodels.ConventionDepth(rgb[o], rgb[o+1], rgb[o+2])
			if math.Abs(float64(v)-want) > 1e-5*math.Abs(want) {
				t.Fatalf("%s pixel %d: %v, want %v", tc.spec, i, v, want)
			}
		}
	}
}

// TestConventionErrors: a canonical-camera model without the camera's fx,
// a uint8 input declared with [0,1] pixels and a ViT size that is not a
// multiple of 14 each fail with the key.
func TestConventionErrors(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	canon, _ := testmodels.Convention(t, "canonical", dir)
	m := openConvention(t, canon, testmodels.ConventionSpecs["canonical"])
	if _, err := m.RunDepth(ctx, conventionImage(64, 32, 1), 64, 32); err == nil || !strings.Contains(err.Error(), "depth.canonical_focal 1000") ||
		!strings.Contains(err.Error(), "intrinsics") {
		t.Errorf("canonical model without fx: %v", err)
	}
	u8, _ := testmodels.Convention(t, "uint8", dir)
	s, err := ParseIOSpec([]byte("input: {name: input_1, layout: NHWC, height: 32, width: 64}\ndepth: {name: Identity, meaning: metric_depth}\n"), "u8.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenModels(ctx, ModelsConfig{Depth: u8, DepthSpec: s}, nil); err == nil || !strings.Contains(err.Error(), `input.pixel_range: input "input_1" is uint8`) {
		t.Errorf("uint8 input with pixel_range 1: %v", err)
	}
	if _, err := ParseIOSpec([]byte("input: {name: pixel_values, height: 30, width: 56, multiple: 14}\ndepth: {name: predicted_depth, meaning: relative}\n"), "vit.yaml"); err == nil ||
		!strings.Contains(err.Error(), "input.height: 30 is not a multiple of 14 (input.multiple); use 28 or 42") {
		t.Errorf("ViT side 30: %v", err)
	}
}
