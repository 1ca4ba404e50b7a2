package offline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/runtime/apps/export"
	"github.com/didoedge/didoedge/runtime/infer"
)

// readout returns the teacher's read-out of frame i of s (from the cache,
// or running the teacher and caching it).
func (t *teacher) readout(ctx context.Context, c *teacherCache, i int, s *dataset.Sample, reused *int) error {
	n := s.Width * s.Height
	t.depth = slices.Grow(t.depth[:0], n)[:n]
	t.conf = nil
	if t.hasConfidence() {
		t.conf = slices.Grow(t.conf[:0], n)[:n]
	}
	ok, err := c.load(i, s.Width, s.Height, t.depth, t.conf)
	if err != nil {
		return err
	}
	if ok {
		*reused++
		return nil
	}
	t0 := time.Now()
	t.models.FrameFocal(s.Intrinsics.Fx, s.Width)
	if t.auxSHA != "" {
		maps, err := t.models.Infer(ctx, s.RGB, s.Width, s.Height)
		if err != nil {
			return fmt.Errorf("teacher: frame %s: %w", s.Name, err)
		}
		if len(maps.Depth) != n || len(maps.Epistemic) != n {
			return fmt.Errorf("teacher: frame %s: maps of %d and %d pixels for a %dx%d frame", s.Name, len(maps.Depth), len(maps.Epistemic), s.Width, s.Height)
		}
		copy(t.depth, maps.Depth)
		copy(t.conf, maps.Epistemic)
	} else {
		dp, err := t.models.RunDepth(ctx, s.RGB, s.Width, s.Height)
		if err != nil {
			return fmt.Errorf("teacher: frame %s: %w", s.Name, err)
		}
		copy(t.depth, dp.Frame)
		if t.conf != nil {
			if len(dp.FrameConfidence) != n {
				return fmt.Errorf("teacher: frame %s: no confidence read-out at the frame's size", s.Name)
			}
			copy(t.conf, dp.FrameConfidence)
		}
	}
	t.rep.Seconds += time.Since(t0).Seconds()
	return c.store(i, s.Width, s.Height, t.depth, t.conf)
}

// batch is how many frames one teacher run takes.
func (t *teacher) batch() int {
	if t.auxSHA != "" {
		return t.models.MaxBatch()
	}
	return t.models.DepthSession().MaxBatch()
}

// prefill runs the teacher in batches on every frame of src its cache
// lacks and caches the read-outs; label then finds them there. fresh
// marks the frames it ran (they are not counted as reused).
func (r *teacherRun) prefill(ctx context.Context, src frameSource) error {
	t := r.t
	b := t.batch()
	if b < 2 {
		return nil // one frame a run, in readout
	}
	for len(t.views) < b {
		v := t.models
		if len(t.views) > 0 {
			var err error
			if v, err = t.models.Share(); err != nil {
				return fmt.Errorf("teacher: %w", err)
			}
		}
		t.views, t.staged = append(t.views, v), append(t.staged, t.models.NewStaged())
	}
	r.fresh = make([]bool, src.Len())
	type pending struct {
		i, w, h int
		name    string
	}
	var batch []pending
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		t0 := time.Now()
		views, staged := t.views[:len(batch)], t.staged[:len(batch)]
		var err error
		if t.auxSHA != "" {
			var st infer.StageTimes
			err = t.models.InferBatch(ctx, views, staged, &st)
		} else {
			err = t.models.DepthBatch(ctx, views, staged)
		}
		if err != nil {
			return fmt.Errorf("teacher: a batch of %d frames from %s: %w", len(batch), batch[0].name, err)
		}
		t.rep.Seconds += time.Since(t0).Seconds()
		for k, p := range batch {
			var depth, conf []float32
			if t.auxSHA != "" {
				m, _, err := views[k].Result()
				if err != nil {
					return fmt.Errorf("teacher: frame %s: %w", p.name, err)
				}
				depth, conf = m.Depth, m.Epistemic
			} else {
				if depth, conf, err = views[k].DepthResult(); err != nil {
					return fmt.Errorf("teacher: frame %s: %w", p.name, err)
				}
				if t.spec.Confidence == nil {
					conf = nil
				}
			}
			n := p.w * p.h
			if len(depth) != n || (t.hasConfidence() && len(conf) != n) {
				return fmt.Errorf("teacher: frame %s: read-outs of %d and %d pixels for a %dx%d frame", p.name, len(depth), len(conf), p.w, p.h)
			}
			if err := r.cache.store(p.i, p.w, p.h, depth, conf); err != nil {
				return err
			}
			r.fresh[p.i] = true
		}
		batch = batch[:0]
		return nil
	}
	for i := 0; i < src.Len(); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := os.Stat(r.cache.path(i)); err == nil {
			continue
		}
		s, err := src.Frame(i)
		if err != nil {
			return fmt.Errorf("teacher: %w", err)
		}
		k := len(batch)
		t.views[k].FrameFocal(s.Intrinsics.Fx, s.Width)
		if err := t.models.Stage(t.staged[k], s.RGB, s.Width, s.Height); err != nil {
			return fmt.Errorf("teacher: frame %s: %w", s.Name, err)
		}
		batch = append(batch, pending{i: i, w: s.Width, h: s.Height, name: s.Name})
		if len(batch) == b {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// hasConfidence: the teacher has a confidence read-out u (its AuxUE's
// K/S, or its native confidence output).
func (t *teacher) hasConfidence() bool { return t.auxSHA != "" || t.spec.Confidence != nil }

// teacherRun labels the frames of one frame source.
type teacherRun struct {
	t        *teacher
	cache    *teacherCache
	ignoreGT bool
	// contract is the student AuxUE's input (its grid, for BlockShare).
	contract auxue.InputContract
	sample   dataset.Sample
	// fresh marks the frames prefill ran in this run (nil: none).
	fresh []bool
}

// Close removes a temporary cache (nil: no teacher).
func (r *teacherRun) Close() error {
	if r == nil {
		return nil
	}
	return r.cache.Close()
}

// label returns frame i of s with its targets in Sparse (the sample is
// reused by the next call) and records the counts in rec; dp is the
// student's pass on the frame.
func (r *teacherRun) label(ctx context.Context, i int, s *dataset.Sample, dp infer.DepthPass, rec *trainingRecord) (*dataset.Sample, error) {
	reused := 0
	if err := r.t.readout(ctx, r.cache, i, s, &reused); err != nil {
		return nil, err
	}
	if i < len(r.fresh) && r.fresh[i] {
		reused = 0 // prefill ran it in this run: in the cache, not reused
	}
	r.t.rep.FramesReused += reused
	r.t.rep.FramesRun += 1 - reused
	r.sample = *s
	if r.ignoreGT {
		r.sample.Sparse = nil
	}
	lc, err := r.t.label(&r.sample, dp.Frame)
	if err != nil {
		return nil, err
	}
	if r.t.cfg.BlockShare > 0 {
		gh, gw := r.contract.Grid()
		r.t.blockGate(&r.sample, dp.Geometry, r.contract.Factor, gh, gw, &lc)
	}
	r.sample.Sparse = r.t.target
	lc.encode(rec.labels)
	return &r.sample, nil
}

// exportRecording makes a recording (an MCAP file, runtime/record) a data
// set: its frames exported once in the KITTI layout (runtime/apps/export,
// what `didoedge record export FILE --kitti DIR --split train` writes)
// under root, keyed by the file's path, size and modification time, and
// reused by the next run. root "" exports into a temporary directory
// that the returned cleanup removes.
func exportRecording(ctx context.Context, path, root string, log *slog.Logger) (dir string, cleanup func(), err error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", nil, fmt.Errorf("recording: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", nil, fmt.Errorf("recording %q: %w", path, err)
	}
	cleanup = func() {}
	if root == "" {
		if root, err = os.MkdirTemp("", "didoedge-recording-"); err != nil {
			return "", nil, err
		}
		tmp := root
		cleanup = func() { os.RemoveAll(tmp) }
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s %d %d", abs, st.Size(), st.ModTime().UnixNano())))
	dir = filepath.Join(root, "recording-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, dataset.MetaFile)); err == nil {
		log.Info("train auxue: reusing the recording's export", "recording", path, "dir", dir)
		return dir, cleanup, nil
	}
	if err := os.RemoveAll(dir); err != nil { // an interrupted export
		cleanup()
		return "", nil, fmt.Errorf("recording %q: %w", path, err)
	}
	res, err := export.KITTI(ctx, path, export.Options{Dir: dir, Split: "train"})
	if err != nil {
		cleanup()
		return "", nil, fmt.Errorf("recording %q: %w", path, err)
	}
	log.Info("train auxue: exported the recording", "recording", path, "dir", dir, "camera", res.Camera, "frames", res.Frames,
		"size", fmt.Sprintf("%dx%d", res.Width, res.Height), "truncated", res.Truncated)
	return dir, cleanup, nil
}
