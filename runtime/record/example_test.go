package record_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/runtime/record"
	"github.com/didoedge/didoedge/runtime/record/mcapsource"
)

// Example records three frames with their depth map and plays them back.
func Example() {
	dir, _ := os.MkdirTemp("", "record-example-")
	defer os.RemoveAll(dir)
	rec, err := record.New(record.Config{Mode: record.ModeContinuous, Dir: dir, FrameFormat: "png",
		Maps: []string{record.MapDepth}}, record.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	rgb := make([]uint8, 4*2*3)
	depth := []float32{1, 2, 3, 4, 5, 6, 7, 8}
	t0 := time.Unix(1_800_000_000, 0)
	for k := 1; k <= 3; k++ {
		rgb[0] = uint8(k)
		rec.Frame(&record.Frame{Camera: "front", Seq: uint64(k), Capture: t0.Add(time.Duration(k) * 100 * time.Millisecond),
			Width: 4, Height: 2, RGB: rgb, MapWidth: 4, MapHeight: 2, Depth: depth})
	}
	if err := rec.Close(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.mcap"))
	src, err := mcapsource.Open(mcapsource.Config{Path: files[0]})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	var f camera.Frame
	for src.Next(context.Background(), &f) == nil {
		fmt.Println(f.SourceID, f.Seq, f.Capture.Sub(t0), f.Width, f.Height, f.RGB[0])
	}
	fmt.Println("written:", rec.Stats().FramesWritten)
	// Output:
	// front 1 100ms 4 2 1
	// front 2 200ms 4 2 2
	// front 3 300ms 4 2 3
	// written: 3
}
