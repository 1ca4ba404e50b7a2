package dataset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// FrameSource renders the frames of simulated drives. Generate opens one
// FrameRenderer per worker and drive and never shares one between
// goroutines.
type FrameSource interface {
	OpenDrive(d Drive) (FrameRenderer, error)
}

// FrameRenderer renders frames of one drive.
type FrameRenderer interface {
	// RenderFrame fills s with frame index of the drive: RGB, Sparse, Dense
	// and Semantic of the data set's size. The maps may alias the
	// renderer's buffers until its next call.
	RenderFrame(index int, s *Sample) error
}

// GenerateOptions configure Generate.
type GenerateOptions struct {
	// Dir is the output directory (created if missing).
	Dir string
	// Meta describes the data set; its Drives (with splits) are rendered.
	Meta Meta
	// Workers bounds the frames rendered in parallel (<= 0 means 1).
	Workers int
	// Progress receives a progress line every ProgressEvery (nil = quiet).
	Progress      io.Writer
	ProgressEvery time.Duration
}

// Generate renders every frame of opts.Meta.Drives with a bounded worker
// pool and writes the KITTI-like layout, the split files and, last,
// meta.json (a directory without meta.json is incomplete). It stops at the
// first error or when ctx is cancelled.
func Generate(ctx context.Context, opts GenerateOptions, src FrameSource) error {
	m := opts.Meta
	m.Format = MetaFormat
	if m.DepthScale == 0 {
		m.DepthScale = KITTIDepthScale
	}
	m.Counts = map[string]int{}
	total := 0
	for _, d := range m.Drives {
		m.Counts[d.Split] += d.Count
		total += d.Count
	}
	blob, err := jsonIndent(m)
	if err != nil {
		return err
	}
	if _, err := ParseMeta(blob, "generated meta"); err != nil {
		return err
	}
	for _, d := range m.Drives {
		p := SimFramePaths(d.Name, 0)
		dirs := []string{p.RGB, p.Sparse, p.Dense, p.Semantic}
		if !m.HasGroundTruth() {
			dirs = dirs[:1]
		}
		for _, f := range dirs {
			if err := os.MkdirAll(filepath.Join(opts.Dir, filepath.Dir(f)), 0o755); err != nil {
				return fmt.Errorf("generate: %w", err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(opts.Dir, SplitsDir), 0o755); err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	tmpDir := filepath.Join(opts.Dir, partialDir)
	if err := os.MkdirAll(tmpDir, 0o755); err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	defer os.RemoveAll(tmpDir)

	type job struct{ drive, k int }
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan job)
	var (
		done     atomic.Int64
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	workers := max(1, opts.Workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cur := -1
			var fr FrameRenderer
			var s Sample
			for j := range jobs {
				if ctx.Err() != nil {
					continue // drain
				}
				d := m.Drives[j.drive]
				if j.drive != cur {
					var err error
					if fr, err = src.OpenDrive(d); err != nil {
						fail(fmt.Errorf("generate: open drive %q: %w", d.Name, err))
						continue
					}
					cur = j.drive
				}
				idx := d.Index(j.k)
				if err := fr.RenderFrame(idx, &s); err != nil {
					fail(fmt.Errorf("generate: drive %q frame %d: %w", d.Name, idx, err))
					continue
				}
				if err := writeSample(opts.Dir, tmpDir, d.Name, idx, &s, m); err != nil {
					fail(fmt.Errorf("generate: %w", err))
					continue
				}
				done.Add(1)
			}
		}()
	}
	stopProgress := startProgress(opts, &done, total)
feed:
	for di, d := range m.Drives {
		for k := 0; k < d.Count; k++ {
			select {
			case jobs <- job{di, k}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	stopProgress()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	for _, split := range SplitNames() {
		var items []Item
		for _, d := range m.Drives {
			if d.Split != split {
				continue
			}
			for k := 0; k < d.Count; k++ {
				items = append(items, Item{Drive: d.Name, Frame: d.Index(k)})
			}
		}
		path := filepath.Join(opts.Dir, SplitsDir, split+".txt")
		if err := writeFileAtomic(tmpDir, path, func(w io.Writer) error { return FormatSplitList(w, items) }); err != nil {
			return fmt.Errorf("generate: %w", err)
		}
	}
	path := filepath.Join(opts.Dir, MetaFile)
	if err := writeFileAtomic(tmpDir, path, func(w io.Writer) error { _, err := w.Write(blob); return err }); err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	return nil
}

func startProgress(opts GenerateOptions, done *atomic.Int64, total int) (stop func()) {
	if opts.Progress == nil {
		return func() {}
	}
	every := opts.ProgressEvery
	if every <= 0 {
		every = time.Second
	}
	start := time.Now()
	print := func(end string) {
		n := done.Load()
		rate := float64(n) / time.Since(start).Seconds()
		fmt.Fprintf(opts.Progress, "\rrendered %d/%d frames (%.0f%%), %.1f frames/s%s", n, total, 100*float64(n)/float64(max(1, total)), rate, end)
	}
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				print("")
			case <-quit:
				print("\n")
				return
			}
		}
	}()
	return func() { close(quit); <-finished }
}

// writeSample writes the four PNGs of one frame (the RGB one alone
// without ground truth).
func writeSample(dir, tmpDir, drive string, index int, s *Sample, m Meta) error {
	n := m.Width * m.Height
	if !m.HasGroundTruth() {
		if s.Width != m.Width || s.Height != m.Height || len(s.RGB) != 3*n {
			return fmt.Errorf("drive %q frame %d: sample is not a %dx%d frame", drive, index, m.Width, m.Height)
		}
		path := filepath.Join(dir, SimFramePaths(drive, index).RGB)
		return writeFileAtomic(tmpDir, path, func(o io.Writer) error { return EncodeRGBPNG(o, m.Width, m.Height, s.RGB) })
	}
	if s.Width != m.Width || s.Height != m.Height || len(s.RGB) != 3*n || len(s.Sparse) != n || len(s.Dense) != n || len(s.Semantic) != n {
		return fmt.Errorf("drive %q frame %d: sample is not a complete %dx%d frame", drive, index, m.Width, m.Height)
	}
	p := SimFramePaths(drive, index)
	w, h := m.Width, m.Height
	return errors.Join(
		writeFileAtomic(tmpDir, filepath.Join(dir, p.RGB), func(o io.Writer) error { return EncodeRGBPNG(o, w, h, s.RGB) }),
		writeFileAtomic(tmpDir, filepath.Join(dir, p.Sparse), func(o io.Writer) error { return EncodeDepthPNG(o, w, h, s.Sparse, m.DepthScale) }),
		writeFileAtomic(tmpDir, filepath.Join(dir, p.Dense), func(o io.Writer) error { return EncodeDepthPNG(o, w, h, s.Dense, m.DepthScale) }),
		writeFileAtomic(tmpDir, filepath.Join(dir, p.Semantic), func(o io.Writer) error { return EncodeLabelPNG(o, w, h, s.Semantic) }),
	)
}

func jsonIndent(m Meta) ([]byte, error) {
	var buf bytes.Buffer
	enc := newJSONEncoder(&buf)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encode meta: %w", err)
	}
	return buf.Bytes(), nil
}
