package infer

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// MaxBatch is the most frames one InferBatch takes.
func (m *Models) MaxBatch() int {
	if m.aux == nil {
		return m.depth.MaxBatch()
	}
	return min(m.depth.MaxBatch(), m.aux.MaxBatch())
}

// InferBatch runs the frames staged for views (staged[k] for views[k]) as
// one batch through the shared sessions: the depth model once for all,
// then the AuxUE once for all. views are m and views of it (Share), each
// at most once, at most MaxBatch of them. Frame k's maps are then
// views[k].Result(). An error fails every frame of the batch (a session
// that cannot run); a frame whose outputs hold NaN or Inf fails alone.
// It allocates nothing once each view's frame size is known.
func (m *Models) InferBatch(ctx context.Context, views []*Models, staged []*Staged, t *StageTimes) error {
	n := len(views)
	if m.aux == nil {
		return errors.New("infer: the models were opened without an AuxUE")
	}
	if n < 1 || n > m.MaxBatch() || len(staged) != n {
		return fmt.Errorf("infer batch: %d views and %d staged frames, the sessions take 1 to %d", n, len(staged), m.MaxBatch())
	}
	t0 := time.Now()
	for k, v := range views {
		if v.depth != m.depth || v.aux != m.aux {
			return errors.New("infer batch: a view of other sessions")
		}
		st := staged[k]
		if !st.have {
			return errors.New("infer batch: a frame that was not staged")
		}
		v.setFrame(st.geo.FrameW, st.geo.FrameH)
		switch {
		case !st.direct:
			copy(m.depth.InputSlot(0, k), st.input)
		case n > 1:
			return fmt.Errorf("infer batch: a frame staged directly into slot 0 in a batch of %d", n)
		}
		v.resImg = st.image
	}
	t.Preprocess = time.Since(t0)
	return m.runSlots(ctx, views, t)
}

// Result is this view's frame of the last InferBatch: maps at the frame's
// size and the input-size image, valid until the next batch.
func (m *Models) Result() (Maps, []uint8, error) { return m.res, m.resImg, m.resErr }

// runSlots runs the depth model and the AuxUE on the filled depth input
// slots, one per view, and leaves each view's maps in its result.
func (m *Models) runSlots(ctx context.Context, views []*Models, t *StageTimes) error {
	n := len(views)
	t1 := time.Now()
	dev := m.deviceOn()
	fr, err := m.depth.RunBatch(ctx, n)
	if err != nil {
		return err
	}
	t2 := time.Now()
	// Depth and AuxUE are ONNX Runtime's execution alone; the output scans
	// (RunBatch's NaN/Inf count) belong to the read-outs, the device
	// path's copies to Copy.
	t.Depth, t.Copy = fr.Run, fr.Copy
	scans := t2.Sub(t1) - fr.Run - fr.Copy
	var slotCopies time.Duration
	for k, v := range views {
		v.res, v.resErr = Maps{}, nil
		if !fr.SlotValid[k] {
			v.resErr = m.nonFinite(m.depth, fr)
		}
		// The read-out depth goes straight into the AuxUE's depth input
		// when that input is the depth on the same grid (no conversion),
		// saving a copy of the map; it is this frame's Maps.Depth then.
		owns := m.cfg.AuxUESpec.OwnsInputs()
		v.resDepth = v.depthOut
		if !dev && owns && v.toInput == nil && len(m.aux.InputSlot(1, k)) == len(v.depthOut) {
			v.resDepth = m.aux.InputSlot(1, k)
		}
		if err := v.focalReady(); err != nil {
			return err
		}
		invalid, err := m.depth.DepthSlotReadout(k, v.resDepth, v.readout)
		if err != nil {
			return err
		}
		v.readConfidence(k)
		if v.toInput != nil {
			if err := v.toInput.Apply(v.depthOut, v.depthIn); err != nil {
				return err
			}
		}
		if dev {
			// The image and model_features are the depth model's device
			// tensors already; the AuxUE's depth input is its raw depth
			// output unless the read-out changed a value.
			switch {
			case !m.dev.depthShared:
				copy(m.aux.InputSlot(1, k), v.depthIn) // uploaded by the AuxUE's run
			case !v.readout.identity() || invalid > 0:
				d, err := m.depth.uploadOutputSlot(0, k, v.depthIn)
				if err != nil {
					return err
				}
				slotCopies += d
			}
			continue
		}
		if owns {
			if !m.aux.InputShared(0) {
				copy(m.aux.InputSlot(0, k), m.depth.InputSlot(0, k))
			}
			if &v.resDepth[0] != &m.aux.InputSlot(1, k)[0] {
				copy(m.aux.InputSlot(1, k), v.depthIn)
			}
			if m.featOut >= 0 {
				copy(m.aux.InputSlot(2, k), m.depth.OutputSlot(m.featOut, k))
			}
			continue
		}
		dst := m.aux.InputSlot(0, k)
		for _, c := range m.auxCopies {
			var src []float32
			switch c.src {
			case auxSrcImage:
				src = m.depth.InputSlot(0, k)
			case auxSrcDepth:
				src = v.depthOut
			default:
				src = m.depth.OutputSlot(c.src, k)
			}
			d := dst[c.off : c.off+c.n]
			if c.scale == 1 {
				copy(d, src)
				continue
			}
			for i, x := range src {
				d[i] = x * c.scale
			}
		}
	}
	t3 := time.Now()
	fa, err := m.aux.RunBatch(ctx, n)
	if err != nil {
		return err
	}
	t4 := time.Now()
	t.AuxUE = fa.Run
	t.Copy += fa.Copy + slotCopies
	scans += t4.Sub(t3) - fa.Run - fa.Copy - slotCopies
	for k, v := range views {
		if !fa.SlotValid[k] && v.resErr == nil {
			v.resErr = m.nonFinite(m.aux, fa)
		}
		if v.resErr != nil {
			continue
		}
		w, h := v.geo.FrameW, v.geo.FrameH
		maps := Maps{Width: w, Height: h, Depth: v.resDepth, Scale: m.aux.OutputSlot(0, k), Epistemic: m.aux.OutputSlot(1, k), Relative: m.relative}
		maps.Native = NativeMaps{Geometry: v.geo, DepthW: m.outW, DepthH: m.outH, Depth: maps.Depth,
			AuxW: m.auxW, AuxH: m.auxH, Scale: maps.Scale, Epistemic: maps.Epistemic, Confidence: v.confMap}
		maps.Confidence = v.confMap
		if f := m.cfg.AuxUESpec.ModelFeatures; f != nil && m.featOut >= 0 && !dev {
			maps.Native.Features = m.depth.OutputSlot(m.featOut, k)
			maps.Native.FeatureC, maps.Native.FeatureH, maps.Native.FeatureW = f.Channels, f.Height, f.Width
		}
		if !v.depthRemap.Identity() {
			if err := v.depthRemap.Apply(v.resDepth, v.frameDepth); err != nil {
				return err
			}
			maps.Depth = v.frameDepth
			if v.confMap != nil {
				if err := v.depthRemap.Apply(v.confMap, v.frameConf); err != nil {
					return err
				}
				maps.Confidence = v.frameConf
			}
		}
		if !v.auxRemap.Identity() {
			if err := v.auxRemap.Apply(maps.Scale, v.frameScale); err != nil {
				return err
			}
			if err := v.auxRemap.Apply(maps.Epistemic, v.frameEpistem); err != nil {
				return err
			}
			maps.Scale, maps.Epistemic = v.frameScale, v.frameEpistem
		}
		v.res = maps
	}
	t.Readout = t3.Sub(t2) + scans + time.Since(t4)
	return nil
}

// DepthBatch runs the depth model alone (as RunDepth does) on the frames
// staged for views (staged[k] for views[k], views as for InferBatch): one
// run for all. Frame k's depth and confidence read-outs at the frame's
// size are then views[k].DepthResult(). An error fails every frame; a
// frame whose depth outputs hold NaN or Inf fails alone.
func (m *Models) DepthBatch(ctx context.Context, views []*Models, staged []*Staged) error {
	n := len(views)
	if n < 1 || n > m.depth.MaxBatch() || len(staged) != n {
		return fmt.Errorf("depth batch: %d views and %d staged frames, the session takes 1 to %d", n, len(staged), m.depth.MaxBatch())
	}
	for k, v := range views {
		if v.depth != m.depth {
			return errors.New("depth batch: a view of another session")
		}
		st := staged[k]
		if !st.have || st.direct {
			return errors.New("depth batch: a frame that was not staged (Stage)")
		}
		v.setFrame(st.geo.FrameW, st.geo.FrameH)
		copy(m.depth.InputSlot(0, k), st.input)
	}
	fr, err := m.depth.RunBatch(ctx, n)
	if err != nil {
		return err
	}
	for k, v := range views {
		v.res, v.resErr = Maps{}, nil
		if !fr.SlotValid[k] {
			v.resErr = m.nonFinite(m.depth, fr)
			continue
		}
		if err := v.focalReady(); err != nil {
			return err
		}
		if _, err := m.depth.DepthSlotReadout(k, v.depthOut, v.readout); err != nil {
			return err
		}
		v.readConfidence(k)
		v.res.Depth, v.res.Confidence = v.depthOut, v.confMap
		if !v.depthRemap.Identity() {
			if err := v.depthRemap.Apply(v.depthOut, v.frameDepth); err != nil {
				return err
			}
			v.res.Depth = v.frameDepth
			if v.confMap != nil {
				if err := v.depthRemap.Apply(v.confMap, v.frameConf); err != nil {
					return err
				}
				v.res.Confidence = v.frameConf
			}
		}
	}
	return nil
}

// DepthResult is this view's frame of the last DepthBatch: the depth and
// the confidence read-out (nil without one) at the frame's size, valid
// until the next batch.
func (m *Models) DepthResult() (depth, confidence []float32, err error) {
	return m.res.Depth, m.res.Confidence, m.resErr
}
