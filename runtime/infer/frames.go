package infer

import "context"

// An Image is a frame of a data set as the models read it: interleaved
// RGB8 pixels and the focal length of the camera that took it
// (dataset.Sample is one). Unlike a stream's camera, each frame of a data
// set may come from its own camera.
type Image interface {
	// Pixels returns the interleaved RGB8 pixels and the frame's size.
	Pixels() (rgb []uint8, width, height int)
	// FocalX is fx in pixels of frames of this width (0: unknown).
	FocalX() float64
}

// InferFrames runs both models on frames 0..n-1 of a data set in order:
// load(i) returns frame i, the models take its camera's focal length
// (FrameFocal) and run (InferTimed, stage times into tm), and each gets
// the frame, its maps and the input-size image the depth model saw, or
// the inference's error, which each wraps, skips (returns nil) or stops
// at. The maps are valid until the next frame. It stops at ctx's end and
// at the first error of load or each.
func InferFrames[F Image](ctx context.Context, m *Models, n int, load func(i int) (F, error), tm *StageTimes,
	each func(i int, f F, maps Maps, img []uint8, err error) error) error {
	return eachFrame(ctx, m, n, load, func(i int, f F, rgb []uint8, w, h int) error {
		maps, img, err := m.InferTimed(ctx, rgb, w, h, tm)
		return each(i, f, maps, img, err)
	})
}

// DepthFrames is InferFrames for the depth model alone (RunDepth): each
// gets the frame's depth pass or the depth model's error.
func DepthFrames[F Image](ctx context.Context, m *Models, n int, load func(i int) (F, error),
	each func(i int, f F, dp DepthPass, err error) error) error {
	return eachFrame(ctx, m, n, load, func(i int, f F, rgb []uint8, w, h int) error {
		dp, err := m.RunDepth(ctx, rgb, w, h)
		return each(i, f, dp, err)
	})
}

// eachFrame is the loop of InferFrames and DepthFrames: the context, the
// frame, its focal length, then run.
func eachFrame[F Image](ctx context.Context, m *Models, n int, load func(i int) (F, error), run func(i int, f F, rgb []uint8, w, h int) error) error {
	for i := range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, err := load(i)
		if err != nil {
			return err
		}
		rgb, w, h := f.Pixels()
		m.FrameFocal(f.FocalX(), w)
		if err := run(i, f, rgb, w, h); err != nil {
			return err
		}
	}
	return nil
}
