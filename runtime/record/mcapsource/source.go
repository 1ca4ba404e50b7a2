package mcapsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // recorded frames
	_ "image/png"  // recorded frames
	"io"
	"strings"
	"time"

	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/runtime/record/mcaprec"
)

// Config configures a replay source.
type Config struct {
	// Path names the recording: the local file read when Open is nil, and
	// the name errors give it (an s3:// URL with Open).
	Path string
	// Open, when set, opens the recording (a stream of an object).
	Open Opener
	// Camera selects the camera; "" takes the only one in the file.
	Camera string
	// Speed paces the frames: 1 plays at the recorded pace, 2 twice as
	// fast; 0 plays as fast as consumed ("max").
	Speed float64
	// SourceID names the frames' source (default: the camera id).
	SourceID string
}

// Source is a camera.Source replaying the frames of one camera of a
// recording.
type Source struct {
	cfg    Config
	r      *Reader
	msg    Message
	camera string

	seqHigh  uint64 // unwrapping of the 32-bit MCAP sequence
	lastSeq  uint32
	lastLog  uint64
	started  bool
	firstLog uint64
	start    time.Time
	frames   int
}

// ConsumerPaced reports whether the replay runs at "max" speed (Speed 0):
// its frames come as fast as they are taken (camera.ConsumerPaced).
func (s *Source) ConsumerPaced() bool { return s.cfg.Speed == 0 }

// Open opens a recording for replay.
func Open(cfg Config) (*Source, error) {
	if cfg.Speed < 0 {
		return nil, fmt.Errorf("replay %s: speed %v is negative", cfg.Path, cfg.Speed)
	}
	if cfg.Camera != "" {
		if err := mcaprec.CheckCamera(cfg.Camera); err != nil {
			return nil, fmt.Errorf("replay %s: %w", cfg.Path, err)
		}
	}
	open := cfg.Open
	if open == nil {
		open = FileOpener(cfg.Path)
	}
	r, err := OpenReaderFrom(cfg.Path, open)
	if err != nil {
		return nil, err
	}
	return &Source{cfg: cfg, r: r, camera: cfg.Camera}, nil
}

// Close closes the file.
func (s *Source) Close() error { return s.r.Close() }

// Truncated reports whether the recording ended inside a chunk (its
// writer was killed): every complete chunk was replayed.
func (s *Source) Truncated() bool { return s.r.Truncated() }

// Frames is the number of frames delivered.
func (s *Source) Frames() int { return s.frames }

// Next implements camera.Source: the next recorded frame of the camera,
// decoded into dst.RGB, with its recorded capture time and sequence
// number; io.EOF after the last one.
func (s *Source) Next(ctx context.Context, dst *camera.Frame) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.r.Next(&s.msg); err != nil {
			if errors.Is(err, io.EOF) && s.frames == 0 {
				what := "no frames"
				if s.camera != "" {
					what = "no frames of camera " + s.camera
				}
				return fmt.Errorf("replay %s: %s: %w", s.cfg.Path, what, io.EOF)
			}
			return err
		}
		m := &s.msg
		if m.Stream != mcaprec.ImageStream || m.SchemaName != mcaprec.CompressedImageSchema {
			continue
		}
		if s.camera == "" {
			s.camera = m.Camera
		} else if m.Camera != s.camera {
			if s.cfg.Camera == "" {
				return fmt.Errorf("replay %s: channel %s: the file has frames of cameras %s and %s: name one", s.cfg.Path, m.Topic, s.camera, m.Camera)
			}
			continue
		}
		return s.deliver(ctx, m, dst)
	}
}

func (s *Source) deliver(ctx context.Context, m *Message, dst *camera.Frame) error {
	img, err := mcaprec.ParseCompressedImage(m.Data)
	if err != nil {
		return fmt.Errorf("replay %s: channel %s: %w", s.cfg.Path, m.Topic, err)
	}
	if s.started && m.LogTime < s.lastLog {
		return fmt.Errorf("replay %s: channel %s: frame at log time %d precedes the previous one (%d): not in log-time order",
			s.cfg.Path, m.Topic, m.LogTime, s.lastLog)
	}
	// Pace: frame k is due at start + (log_k - log_0) / speed.
	now := time.Now()
	if !s.started {
		s.firstLog, s.start = m.LogTime, now
	} else if s.cfg.Speed > 0 {
		due := s.start.Add(time.Duration(float64(m.LogTime-s.firstLog) / s.cfg.Speed))
		if wait := due.Sub(now); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
	// Sequence numbers are stored mod 2^32; a decrease is a wrap.
	if s.started && m.Sequence < s.lastSeq {
		s.seqHigh += 1 << 32
	}
	s.started, s.lastSeq, s.lastLog = true, m.Sequence, m.LogTime
	var w, h int
	switch strings.ToLower(img.Format) {
	case "jpeg", "jpg":
		dst.RGB, w, h, err = camera.DecodeJPEG(img.Data, dst.RGB)
		dst.Codec = "JPEG"
	case "png":
		var pic image.Image
		if pic, _, err = image.Decode(bytes.NewReader(img.Data)); err == nil {
			dst.RGB, w, h = camera.ImageToRGB(pic, dst.RGB)
		}
		dst.Codec = "PNG"
	default:
		err = fmt.Errorf("unsupported image format %q", img.Format)
	}
	if err != nil {
		return fmt.Errorf("replay %s: channel %s: frame %d: %w", s.cfg.Path, m.Topic, m.Sequence, err)
	}
	dst.Width, dst.Height = w, h
	dst.SourceID = s.cfg.SourceID
	if dst.SourceID == "" {
		dst.SourceID = s.camera
	}
	dst.Seq = s.seqHigh | uint64(m.Sequence)
	dst.Capture = time.Unix(0, int64(m.LogTime))
	dst.Decoded = time.Now()
	s.frames++
	return nil
}

var _ camera.Source = (*Source)(nil)
