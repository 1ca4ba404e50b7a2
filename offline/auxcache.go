package offline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/runtime/infer"
)

// cachedFrames is a frame cache and how much of it an earlier run made.
type cachedFrames struct {
	*frameCache
	reused int
}

// cacheFill is what filling a frame cache takes: the cache directory, the
// depth model, the preparer of the AuxUE's inputs and targets, the
// records' layout and grid, and where the phase times, the progress bar
// and the log go.
type cacheFill struct {
	dir      string
	models   *infer.Models
	prep     *preparer
	layout   recordLayout
	grid     [2]int
	phases   *PhaseTimes
	progress io.Writer
	log      *slog.Logger
}

// fill opens the cache of src under key and runs the depth model (and the
// teacher of tr, nil: none) on the frames it does not hold yet.
func (f cacheFill) fill(ctx context.Context, tr *teacherRun, src frameSource, key any, what string) (*cachedFrames, error) {
	c, err := openCache(f.dir, key, f.layout, f.grid)
	if err != nil {
		return nil, err
	}
	cf := &cachedFrames{frameCache: c, reused: min(c.n, src.Len())}
	if c.n > src.Len() {
		c.Close()
		return nil, fmt.Errorf("cache %q holds %d frames, the data %d", c.dir, c.n, src.Len())
	}
	if c.n > 0 {
		f.log.Info("train auxue: reusing cached frames", "cache", c.dir, "frames", c.n, "of", src.Len())
	}
	bar := newProgress(f.progress, what, "frames", src.Len())
	rec := f.layout.newRecord()
	ph := f.phases
	first := c.n // frames first.. are not cached yet
	var t0, t1 time.Time
	load := func(i int) (*dataset.Sample, error) {
		t0 = time.Now()
		s, err := src.Frame(first + i)
		if err != nil {
			return nil, fmt.Errorf("train auxue: %w", err)
		}
		t1 = time.Now()
		return s, nil
	}
	err = infer.DepthFrames(ctx, f.models, src.Len()-first, load, func(k int, s *dataset.Sample, dp infer.DepthPass, err error) error {
		if err != nil {
			return fmt.Errorf("train auxue: frame %s: %w", s.Name, err)
		}
		i := first + k
		if tr != nil {
			if s, err = tr.label(ctx, i, s, dp, rec); err != nil {
				return fmt.Errorf("train auxue: %w", err)
			}
		}
		t2 := time.Now()
		if err := f.prep.prepare(s, dp, rec); err != nil {
			return fmt.Errorf("train auxue: %w", err)
		}
		t3 := time.Now()
		if err := c.append(rec); err != nil {
			return err
		}
		ph.Load += Seconds(t1.Sub(t0))
		ph.Depth += Seconds(t2.Sub(t1))
		ph.Prepare += Seconds(t3.Sub(t2))
		ph.CacheWrite += since(t3)
		bar.set(i+1, "")
		return nil
	})
	if err != nil {
		c.Close()
		return nil, err
	}
	bar.finish("")
	return cf, nil
}

// auxSources builds the training and validation frames of d (seed: the
// simulated pool's; teacher: a teacher labels the frames without ground
// truth).
func auxSources(d AuxData, seed int64, teacher bool) (train, val frameSource, err error) {
	if d.Data == "" {
		tr, err := newSimPool(seed, d.Drives, d.FramesPerDrive, d.Width, d.Height, d.Frames, 0, 0x6361636865)
		if err != nil {
			return nil, nil, err
		}
		if d.ValSplit == "none" || d.ValFrames == 0 {
			return tr, nil, nil
		}
		// Validation drives follow the training drives (never trained on).
		va, err := newSimPool(seed, d.ValDrives, d.FramesPerDrive, d.Width, d.Height, d.ValFrames, d.Drives, 0x76616c)
		if err != nil {
			return nil, nil, err
		}
		return tr, va, nil
	}
	src := dataset.Source{Dir: d.Data, FS: d.DataFS, Layout: d.Layout, KITTIDepth: d.KITTIDepth, KITTIDepthFS: d.KITTIDepthFS}
	tr, err := openDataFrames(src, d.Split, d.Frames)
	if err != nil {
		return nil, nil, err
	}
	tr.withoutTruth = tr.withoutTruth || teacher
	if d.ValSplit == "none" {
		return tr, nil, nil
	}
	va, err := openDataFrames(src, d.ValSplit, max(d.ValFrames, 0))
	if err != nil {
		return nil, nil, fmt.Errorf("validation split (--val-split none skips it): %w", err)
	}
	va.withoutTruth = va.withoutTruth || teacher
	return tr, va, nil
}

// featureStats sets the mean and standard deviation of each of the depth
// model's channels (after projection and resize, channels base... of every
// record) over the training cache; a constant channel keeps std 1.
func featureStats(tc *cachedFrames, layout recordLayout, base int, mf *auxue.ModelFeatures) error {
	g := layout.G
	sum, sq := make([]float64, mf.Out), make([]float64, mf.Out)
	rec := layout.newRecord()
	for i := 0; i < tc.n; i++ {
		if err := tc.read(i, rec); err != nil {
			return err
		}
		for o := 0; o < mf.Out; o++ {
			for _, v := range rec.feats[(base+o)*g : (base+o+1)*g] {
				sum[o] += float64(v)
				sq[o] += float64(v) * float64(v)
			}
		}
	}
	n := float64(tc.n * g)
	mf.Mean, mf.Std = make([]float32, mf.Out), make([]float32, mf.Out)
	for o := range sum {
		m := sum[o] / n
		sd := math.Sqrt(max(sq[o]/n-m*m, 0))
		if !(sd > 1e-6) {
			sd = 1
		}
		mf.Mean[o], mf.Std[o] = float32(m), float32(sd)
	}
	return mf.Validate()
}
