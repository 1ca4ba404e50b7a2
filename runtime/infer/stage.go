package infer

import "fmt"

// Staged is one frame fitted into the depth model's input and normalized
// ahead of its run (Models.Stage), so that this work can overlap the
// models' runs on another goroutine. Each camera keeps its own.
type Staged struct {
	geo     Geometry
	have    bool
	resizer *Resizer
	input   []float32 // the depth model's image input, one frame
	image   []uint8   // the input-size RGB8 image the model sees
	// direct: the normalized frame is in the depth session's input slot
	// 0, not in input (StageDirect).
	direct bool
}

// Direct reports whether st was staged by StageDirect.
func (st *Staged) Direct() bool { return st.direct }

// Image is the input-size RGB8 image of the staged frame (InW x InH).
func (st *Staged) Image() []uint8 { return st.image }

// Geometry is how the staged frame sits in the input.
func (st *Staged) Geometry() Geometry { return st.geo }

// NewStaged allocates the buffers of one staged frame.
func (m *Models) NewStaged() *Staged {
	return &Staged{input: make([]float32, len(m.depth.Input())), image: make([]uint8, 3*m.inW*m.inH)}
}

// Stage fits an interleaved RGB8 frame of any size into the input and
// normalizes it into st. It reads only the models' description and st,
// never the sessions' tensors, so it may run on another goroutine while
// the models run (one goroutine per st). It allocates only when the frame
// size changes.
func (m *Models) Stage(st *Staged, rgb []uint8, w, h int) error {
	st.direct = false
	return m.stage(st, st.input, rgb, w, h)
}

// StageDirect stages a frame as Stage does, but normalizes it straight
// into the depth session's input slot 0 (which the AuxUE's image input
// shares), so that InferBatch of this frame alone copies nothing: a
// 640x192 frame is 1.5 MB that the copy would move on the frame's path.
// The caller guarantees that no InferBatch runs on these sessions from
// the start of StageDirect until the batch of this frame, and that no
// other frame is staged directly before then: one camera, whose
// scheduler is idle (runtime's single-camera pipeline).
func (m *Models) StageDirect(st *Staged, rgb []uint8, w, h int) error {
	st.direct = true
	return m.stage(st, m.depth.InputSlot(0, 0), rgb, w, h)
}

// stage fits rgb into st's geometry and image and normalizes it into dst.
func (m *Models) stage(st *Staged, dst []float32, rgb []uint8, w, h int) error {
	if w <= 0 || h <= 0 || len(rgb) < 3*w*h {
		return fmt.Errorf("preprocess: frame of %d bytes is not a %dx%d RGB image", len(rgb), w, h)
	}
	if !st.have || st.geo.FrameW != w || st.geo.FrameH != h {
		st.geo, st.have = m.Geometry(w, h), true
		st.resizer = NewResizer(st.geo.CW, st.geo.CH)
		clear(st.image) // black borders
	}
	img, err := st.resizer.Resize(rgb, w, h)
	if err != nil {
		return fmt.Errorf("preprocess: %w", err)
	}
	g := st.geo
	if g.CW != m.inW || g.CH != m.inH {
		for y := 0; y < g.CH; y++ {
			copy(st.image[3*((g.Y0+y)*m.inW+g.X0):], img[3*y*g.CW:3*(y+1)*g.CW])
		}
	} else {
		copy(st.image, img) // img may be the caller's frame
	}
	if err := m.depth.ImageInto(dst, st.image, m.inW, m.inH, 3*m.inW); err != nil {
		return fmt.Errorf("preprocess: %w", err)
	}
	return nil
}
