package camera

import (
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writePNG(t *testing.T, path string, c color.NRGBA) {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 4, 2))
	for y := 0; y < 2; y++ {
		for x := 0; x < 4; x++ {
			img.SetNRGBA(x, y, c)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
}

// TestImageSequence plays a KITTI-style directory in name order, paced at
// the requested rate, then reports io.EOF.
func TestImageSequence(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "image_02", "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Written out of order; values encode the expected position.
	writePNG(t, filepath.Join(dir, "0000000002.png"), color.NRGBA{30, 0, 0, 255})
	writePNG(t, filepath.Join(dir, "0000000000.png"), color.NRGBA{10, 0, 0, 255})
	writePNG(t, filepath.Join(dir, "0000000001.png"), color.NRGBA{20, 0, 0, 255})
	if err := os.WriteFile(filepath.Join(dir, "timestamps.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	const fps = 50
	s, err := NewImageSequence(SequenceConfig{Dir: dir, FPS: fps})
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 3 {
		t.Fatalf("%d images, want 3 (non-images ignored)", s.Len())
	}
	var f Frame
	var first time.Time
	for i := 0; i < 3; i++ {
		if err := s.Next(context.Background(), &f); err != nil {
			t.Fatal(err)
		}
		if f.Seq != uint64(i+1) || f.Width != 4 || f.Height != 2 || f.RGB[0] != uint8(10*(i+1)) || f.Codec != "PNG" {
			t.Fatalf("frame %d: seq %d %dx%d first pixel %v codec %s", i, f.Seq, f.Width, f.Height, f.RGB[:3], f.Codec)
		}
		if i == 0 {
			first = f.Capture
		} else if got, want := f.Capture.Sub(first), time.Duration(i)*time.Second/fps; got != want {
			t.Errorf("frame %d captured %v after the first, want %v", i, got, want)
		}
		if f.Decoded.Before(f.Capture) {
			t.Errorf("frame %d handed out before its due time", i)
		}
	}
	if err := s.Next(context.Background(), &f); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last image: %v, want io.EOF", err)
	}
}

func TestImageSequenceErrors(t *testing.T) {
	empty := t.TempDir()
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "0001.png"), []byte("not a png"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewImageSequence(SequenceConfig{Dir: empty}); err == nil || !strings.Contains(err.Error(), empty) {
		t.Errorf("empty dir: %v", err)
	}
	if _, err := NewImageSequence(SequenceConfig{Dir: filepath.Join(empty, "missing")}); err == nil {
		t.Error("missing dir accepted")
	}
	s, err := NewImageSequence(SequenceConfig{Dir: bad, Loop: true})
	if err != nil {
		t.Fatal(err)
	}
	var f Frame
	if err := s.Next(context.Background(), &f); err == nil || !strings.Contains(err.Error(), "0001.png") {
		t.Errorf("corrupt png: %v, want an error naming the file", err)
	}
}
