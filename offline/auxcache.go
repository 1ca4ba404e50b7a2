package offline

import (
	"context"
	"fmt"
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

// fillCache opens the cache for src and runs the depth model on the frames
// it does not hold yet.
func fillCache(ctx context.Context, cfg AuxTrainConfig, models *infer.Models, prep *preparer, tr *teacherRun, src frameSource,
	key any, layout recordLayout, grid [2]int, ph *PhaseTimes, log *slog.Logger, what string) (*cachedFrames, error) {
	c, err := openCache(cfg.CacheDir, key, layout, grid)
	if err != nil {
		return nil, err
	}
	cf := &cachedFrames{frameCache: c, reused: min(c.n, src.Len())}
	if c.n > src.Len() {
		c.Close()
		return nil, fmt.Errorf("cache %q holds %d frames, the data %d", c.dir, c.n, src.Len())
	}
	if c.n > 0 {
		log.Info("train auxue: reusing cached frames", "cache", c.dir, "frames", c.n, "of", src.Len())
	}
	bar := newProgress(cfg.Progress, what, "frames", src.Len())
	rec := layout.newRecord()
	for i := c.n; i < src.Len(); i++ {
		if err := ctx.Err(); err != nil {
			c.Close()
			return nil, err
		}
		t0 := time.Now()
		s, err := src.Frame(i)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("train auxue: %w", err)
		}
		t1 := time.Now()
		models.FrameFocal(s.Intrinsics.Fx, s.Width)
		dp, err := models.RunDepth(ctx, s.RGB, s.Width, s.Height)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("train auxue: frame %s: %w", s.Name, err)
		}
		if tr != nil {
			if s, err = tr.label(ctx, i, s, dp, rec); err != nil {
				c.Close()
				return nil, fmt.Errorf("train auxue: %w", err)
			}
		}
		t2 := time.Now()
		if err := prep.prepare(s, dp, rec); err != nil {
			c.Close()
			return nil, fmt.Errorf("train auxue: %w", err)
		}
		t3 := time.Now()
		if err := c.append(rec); err != nil {
			c.Close()
			return nil, err
		}
		ph.Load += t1.Sub(t0)
		ph.Depth += t2.Sub(t1)
		ph.Prepare += t3.Sub(t2)
		ph.CacheWrite += time.Since(t3)
		bar.set(i+1, "")
	}
	bar.finish("")
	return cf, nil
}

// auxSources builds the training and validation frames.
func auxSources(cfg AuxTrainConfig) (train, val frameSource, err error) {
	if cfg.Data == "" {
		tr, err := newSimPool(cfg.Seed, cfg.Drives, cfg.FramesPerDrive, cfg.Width, cfg.Height, cfg.Frames, 0, 0x6361636865)
		if err != nil {
			return nil, nil, err
		}
		if cfg.ValSplit == "none" || cfg.ValFrames == 0 {
			return tr, nil, nil
		}
		// Validation drives follow the training drives (never trained on).
		va, err := newSimPool(cfg.Seed, cfg.ValDrives, cfg.FramesPerDrive, cfg.Width, cfg.Height, cfg.ValFrames, cfg.Drives, 0x76616c)
		if err != nil {
			return nil, nil, err
		}
		return tr, va, nil
	}
	src := dataset.Source{Dir: cfg.Data, FS: cfg.DataFS, Layout: cfg.Layout, KITTIDepth: cfg.KITTIDepth, KITTIDepthFS: cfg.KITTIDepthFS}
	tr, err := openDataFrames(src, cfg.Split, cfg.Frames)
	if err != nil {
		return nil, nil, err
	}
	tr.withoutTruth = tr.withoutTruth || cfg.Teacher.Enabled()
	if cfg.ValSplit == "none" {
		return tr, nil, nil
	}
	va, err := openDataFrames(src, cfg.ValSplit, max(cfg.ValFrames, 0))
	if err != nil {
		return nil, nil, fmt.Errorf("validation split (--val-split none skips it): %w", err)
	}
	va.withoutTruth = va.withoutTruth || cfg.Teacher.Enabled()
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
