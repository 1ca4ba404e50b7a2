package corrupt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"image"
	"image/png"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// DatasetOptions describes one corruption run over a KITTI-like data set.
type DatasetOptions struct {
	In, Out string
	// Types and Severities to produce. With exactly one of each and
	// Nested false, the corrupted set is written directly under Out;
	// otherwise under Out/<type>/<severity>/.
	Types      []string
	Severities []int
	Nested     bool
	Seed       uint64
	Workers    int // <= 0: GOMAXPROCS
	// Progress, when set, is called after each written frame with the
	// number of frames written so far and the total (serialized).
	Progress func(done, total int)
	Log      *slog.Logger
}

// DatasetStats counts what a run wrote.
type DatasetStats struct {
	Frames int // corrupted frames written (all targets)
	Copied int // other files linked or copied (all targets)
}

// IsFrame reports whether a slash-separated path relative to the data set
// root is an RGB frame: a .png file directly under an image_02/data/
// directory. Only frames are corrupted; everything else is copied.
func IsFrame(rel string) bool {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	n := len(parts)
	return n >= 3 && parts[n-2] == "data" && parts[n-3] == "image_02" &&
		strings.EqualFold(filepath.Ext(parts[n-1]), ".png")
}

// FrameSeed derives the seed of one frame from the run seed and the frame's
// slash-separated relative path, so that frames get independent noise and
// every severity of a frame shares its random draws.
func FrameSeed(seed uint64, rel string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(filepath.ToSlash(rel)))
	z := seed ^ h.Sum64()
	// splitmix64 finalizer
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

type target struct {
	root     string
	name     string
	severity int
}

// CorruptDataset writes corrupted copies of the data set opts.In. Frames are
// decoded once and corrupted for every target by a bounded worker pool;
// every output is written to a temporary file and renamed into place.
func CorruptDataset(ctx context.Context, opts DatasetOptions) (DatasetStats, error) {
	var stats DatasetStats
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if len(opts.Types) == 0 || len(opts.Severities) == 0 {
		return stats, errors.New("corrupt data set: no corruption types or severities given")
	}
	for _, t := range opts.Types {
		for _, s := range opts.Severities {
			if err := Validate(t, s); err != nil {
				return stats, err
			}
		}
	}
	in, err := filepath.Abs(opts.In)
	if err != nil {
		return stats, fmt.Errorf("input %q: %w", opts.In, err)
	}
	out, err := filepath.Abs(opts.Out)
	if err != nil {
		return stats, fmt.Errorf("output %q: %w", opts.Out, err)
	}
	if st, err := os.Stat(in); err != nil {
		return stats, fmt.Errorf("input %q: %w", opts.In, err)
	} else if !st.IsDir() {
		return stats, fmt.Errorf("input %q is not a directory", opts.In)
	}
	if rel, err := filepath.Rel(in, out); err == nil && (rel == "." || !strings.HasPrefix(rel, "..")) {
		return stats, fmt.Errorf("output %q must not be inside input %q", opts.Out, opts.In)
	}

	var frames, others []string
	err = filepath.WalkDir(in, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walk %q: %w", p, err)
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(in, p)
		if !d.Type().IsRegular() {
			st, err := os.Stat(p) // follow symlinks to files
			if err != nil || !st.Mode().IsRegular() {
				opts.Log.Warn("skipping non-regular file", "path", p)
				return nil
			}
		}
		if IsFrame(rel) {
			frames = append(frames, rel)
		} else {
			others = append(others, rel)
		}
		return nil
	})
	if err != nil {
		return stats, err
	}
	if len(frames) == 0 {
		return stats, fmt.Errorf("input %q has no frames (*.png under image_02/data/)", opts.In)
	}

	var targets []target
	nested := opts.Nested || len(opts.Types) > 1 || len(opts.Severities) > 1
	for _, t := range opts.Types {
		for _, s := range opts.Severities {
			root := out
			if nested {
				root = filepath.Join(out, t, strconv.Itoa(s))
			}
			targets = append(targets, target{root, t, s})
		}
	}
	for _, tg := range targets {
		for _, rel := range others {
			if err := ctx.Err(); err != nil {
				return stats, err
			}
			if err := linkOrCopy(filepath.Join(in, rel), filepath.Join(tg.root, rel)); err != nil {
				return stats, err
			}
			stats.Copied++
		}
	}

	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(frames))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan string)
	var (
		wg      sync.WaitGroup
		done    atomic.Int64
		progMu  sync.Mutex
		total   = len(frames) * len(targets)
		written atomic.Int64
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fw := frameWorker{c: NewCorruptor()}
			for rel := range jobs {
				if ctx.Err() != nil {
					continue
				}
				err := fw.process(ctx, in, rel, targets, opts.Seed, func() {
					written.Add(1)
					n := int(done.Add(1))
					if opts.Progress != nil {
						progMu.Lock()
						opts.Progress(n, total)
						progMu.Unlock()
					}
				})
				if err != nil {
					cancel(err)
				}
			}
		}()
	}
feed:
	for _, rel := range frames {
		select {
		case jobs <- rel:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	stats.Frames = int(written.Load())
	if err := context.Cause(ctx); err != nil {
		return stats, err
	}
	return stats, nil
}

// frameWorker holds one goroutine's reusable buffers.
type frameWorker struct {
	c   *Corruptor
	rgb []uint8
	out []uint8
	enc bytes.Buffer
	pe  png.Encoder
	img *image.NRGBA
}

func (fw *frameWorker) process(ctx context.Context, in, rel string, targets []target, seed uint64, wrote func()) error {
	path := filepath.Join(in, rel)
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("frame %q: %w", path, err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("frame %q: decode png: %w", path, err)
	}
	var w, h int
	fw.rgb, w, h = ImageToRGB(img, fw.rgb)
	if w == 0 || h == 0 {
		return fmt.Errorf("frame %q: empty image", path)
	}
	fw.out = grow(fw.out, len(fw.rgb))
	frameSeed := FrameSeed(seed, rel)
	for _, tg := range targets {
		if err := ctx.Err(); err != nil {
			return nil // the run is being cancelled; its cause is reported once
		}
		if err := fw.c.Apply(fw.out, fw.rgb, w, h, tg.name, tg.severity, frameSeed); err != nil {
			return fmt.Errorf("frame %q: %w", path, err)
		}
		fw.img = RGBToImage(fw.out, w, h, fw.img)
		fw.enc.Reset()
		if err := fw.pe.Encode(&fw.enc, fw.img); err != nil {
			return fmt.Errorf("frame %q: encode png: %w", path, err)
		}
		dst := filepath.Join(tg.root, rel)
		if err := writeAtomic(dst, bytes.NewReader(fw.enc.Bytes()), 0o644); err != nil {
			return fmt.Errorf("frame %q: %w", path, err)
		}
		wrote()
	}
	return nil
}

// writeAtomic writes r to path through a temporary file in the same
// directory and renames it into place.
func writeAtomic(path string, r io.Reader, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %q: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	name := tmp.Name()
	_, err = io.Copy(tmp, r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(name, perm)
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
		return fmt.Errorf("write %q: %w", path, err)
	}
	return nil
}

// linkOrCopy places an unchanged copy of src at dst: a hard link when the
// file system allows it, else a byte copy; either way atomically.
func linkOrCopy(src, dst string) error {
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %q: %w", dir, err)
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.link-%d", filepath.Base(dst), os.Getpid()))
	os.Remove(tmp)
	if err := os.Link(src, tmp); err == nil {
		err := os.Rename(tmp, dst)
		// rename is a no-op when dst is already this very inode (a
		// re-run); the temporary link is then left behind.
		os.Remove(tmp)
		if err != nil {
			return fmt.Errorf("copy %q to %q: %w", src, dst, err)
		}
		return nil
	}
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy %q: %w", src, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("copy %q: %w", src, err)
	}
	if err := writeAtomic(dst, f, st.Mode().Perm()); err != nil {
		return fmt.Errorf("copy %q: %w", src, err)
	}
	return nil
}
