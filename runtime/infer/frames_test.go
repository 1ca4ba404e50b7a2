package infer

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/didoedge/didoedge/internal/testmodels"
)

// testImage is a data set's frame for DepthFrames.
type testImage struct {
	rgb  []uint8
	w, h int
	fx   float64
}

func (f testImage) Pixels() ([]uint8, int, int) { return f.rgb, f.w, f.h }
func (f testImage) FocalX() float64             { return f.fx }

// TestDepthFramesTakeEachFramesFocal: a canonical-camera model (Metric3D:
// metres = d_canonical f_input / canonical_focal) read over frames of
// their own cameras: each frame's fx sets its metres (fx twice as long:
// the depth twice as far), a frame without fx keeps the last one, a frame
// before any fx gets the model's error (handed to each, which may skip
// it), and a cancelled context stops the loop before the next frame.
func TestDepthFramesTakeEachFramesFocal(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	model, _ := testmodels.Convention(t, "canonical", dir)
	m := openConvention(t, model, testmodels.ConventionSpecs["canonical"])
	iw, ih := testmodels.ConventionSize("canonical")
	rgb := conventionImage(iw, ih, 1)
	frames := []testImage{
		{rgb, iw, ih, 0}, // no fx yet: the read-out refuses
		{rgb, iw, ih, testmodels.ConvFocalInput},
		{rgb, iw, ih, 2 * testmodels.ConvFocalInput},
		{rgb, iw, ih, 0}, // keeps 2 ConvFocalInput
	}
	wantScale := []float64{0, 1, 2, 2}
	var loaded, seen []int
	err := DepthFrames(ctx, m, len(frames), func(i int) (testImage, error) {
		loaded = append(loaded, i)
		return frames[i], nil
	}, func(i int, f testImage, dp DepthPass, err error) error {
		seen = append(seen, i)
		if i == 0 {
			if err == nil {
				t.Error("frame 0 without a focal length: no error")
			}
			return nil // skipped
		}
		if err != nil {
			return err
		}
		if f.fx != frames[i].fx {
			t.Errorf("frame %d: each got fx %v, want %v", i, f.fx, frames[i].fx)
		}
		worst := 0.0
		for y := range ih {
			for x := range iw {
				o := 3 * (y*iw + x)
				want := wantScale[i] * testmodels.ConventionDepth(rgb[o], rgb[o+1], rgb[o+2])
				worst = math.Max(worst, math.Abs(float64(dp.Depth[y*iw+x])-want)/want)
			}
		}
		if worst > 2e-5 {
			t.Errorf("frame %d (fx %v): depth off the closed form by %.3g (relative)", i, f.fx, worst)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 4 || len(seen) != 4 {
		t.Fatalf("loaded %v, each saw %v; want every frame once", loaded, seen)
	}

	// each's error and a cancelled context stop the loop.
	stop := errors.New("stop")
	loaded = loaded[:0]
	err = DepthFrames(ctx, m, len(frames), func(i int) (testImage, error) {
		loaded = append(loaded, i)
		return frames[i], nil
	}, func(i int, _ testImage, _ DepthPass, _ error) error {
		if i == 1 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || len(loaded) != 2 {
		t.Fatalf("each's error: %v after loading %v, want stop after frames 0 and 1", err, loaded)
	}
	cctx, cancel := context.WithCancel(ctx)
	loaded = loaded[:0]
	err = DepthFrames(cctx, m, len(frames), func(i int) (testImage, error) {
		loaded = append(loaded, i)
		return frames[i], nil
	}, func(i int, _ testImage, _ DepthPass, _ error) error {
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || len(loaded) != 1 {
		t.Fatalf("cancelled: %v after loading %v, want context.Canceled after frame 0", err, loaded)
	}
}
