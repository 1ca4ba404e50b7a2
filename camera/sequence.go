package camera

import (
	"bytes"
	"context"
	"fmt"
	"image"
	_ "image/jpeg" // registers JPEG for image sequences
	_ "image/png"  // registers PNG for image sequences
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/didoedge/didoedge/internal/boundedfile"
)

// MaxSequencePixels bounds a sequence frame's size (width x height, from
// its header before it is decoded): 8K UHD and then some; a PNG that
// claims 100000 x 100000 would need 40 GB decoded.
const MaxSequencePixels = 8192 * 8192

// ImageSequence plays a directory of still images (.png, .jpg, .jpeg; for
// example KITTI's image_02/data) in lexical order as a Source.
type ImageSequence struct {
	id     string
	files  []string
	period time.Duration // 0: as fast as consumed
	loop   bool
	next   int
	seq    uint64
	start  time.Time
}

// SequenceConfig configures NewImageSequence.
type SequenceConfig struct {
	Dir string
	// FPS paces the frames (capture times advance by 1/FPS and Next waits
	// for each frame's due time); 0 plays as fast as consumed.
	FPS float64
	// Loop restarts at the first file instead of returning io.EOF.
	Loop bool
	// SourceID defaults to Dir.
	SourceID string
}

// NewImageSequence lists cfg.Dir. It fails when the directory holds no image.
func NewImageSequence(cfg SequenceConfig) (*ImageSequence, error) {
	if cfg.FPS < 0 {
		return nil, fmt.Errorf("image sequence %q: fps %v is negative", cfg.Dir, cfg.FPS)
	}
	entries, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("image sequence: %w", err)
	}
	var files []string
	for _, e := range entries {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".png", ".jpg", ".jpeg":
			if !e.IsDir() {
				files = append(files, filepath.Join(cfg.Dir, e.Name()))
			}
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("image sequence %q: no .png or .jpg files", cfg.Dir)
	}
	slices.Sort(files)
	s := &ImageSequence{id: cfg.SourceID, files: files, loop: cfg.Loop}
	if s.id == "" {
		s.id = cfg.Dir
	}
	if cfg.FPS > 0 {
		s.period = time.Duration(float64(time.Second) / cfg.FPS)
	}
	return s, nil
}

// ConsumerPaced reports whether the sequence has no fps: its frames come
// as fast as they are taken (camera.ConsumerPaced).
func (s *ImageSequence) ConsumerPaced() bool { return s.period == 0 }

// Len is the number of images.
func (s *ImageSequence) Len() int { return len(s.files) }

// Next implements Source. It returns io.EOF after the last image unless the
// sequence loops; a file that fails to decode is an error naming the file.
func (s *ImageSequence) Next(ctx context.Context, dst *Frame) error {
	if s.next >= len(s.files) {
		if !s.loop {
			return io.EOF
		}
		s.next = 0
	}
	if s.start.IsZero() {
		s.start = time.Now()
	}
	capture := time.Now()
	if s.period > 0 {
		capture = s.start.Add(time.Duration(s.seq) * s.period)
		if wait := time.Until(capture); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	} else if err := ctx.Err(); err != nil {
		return err
	}
	path := s.files[s.next]
	s.next++
	// Bounded: the directory may be one a request named; a "frame" that
	// is /dev/zero behind a link, a FIFO or a 1 GB file is refused.
	data, err := boundedfile.Read("", path, boundedfile.Image)
	if err != nil {
		return fmt.Errorf("image sequence: %w", err)
	}
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil && int64(cfg.Width)*int64(cfg.Height) > MaxSequencePixels {
		return fmt.Errorf("image sequence: %q is %dx%d, over %d pixels", path, cfg.Width, cfg.Height, MaxSequencePixels)
	}
	img, format, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("image sequence: decode %q: %w", path, err)
	}
	s.seq++
	dst.RGB, dst.Width, dst.Height = ImageToRGB(img, dst.RGB)
	dst.SourceID = s.id
	dst.Seq = s.seq
	dst.Capture = capture
	dst.Decoded = time.Now()
	dst.Codec = strings.ToUpper(format)
	return nil
}
