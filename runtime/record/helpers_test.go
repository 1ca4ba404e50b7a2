package record

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// schemaFile reads one of alerts/schema's JSON Schemas.
func schemaFile(t testing.TB, name string) []byte {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "alerts", "schema", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testStreams(t testing.TB) []JSONStream {
	return []JSONStream{
		{Name: "events", SchemaName: "didoedge.event/1", Schema: schemaFile(t, "event.v1.json")},
		{Name: "zone_states", SchemaName: "didoedge.state/1", Schema: schemaFile(t, "state.v1.json")},
	}
}

// synthFrame fills a smooth test picture and maps that change with k.
type synthFrame struct {
	Frame
}

func newSynth(camera string, w, h, mw, mh int) *synthFrame {
	return &synthFrame{Frame{Camera: camera, Width: w, Height: h, RGB: make([]uint8, w*h*3),
		MapWidth: mw, MapHeight: mh, Depth: make([]float32, mw*mh), Scale: make([]float32, mw*mh), Epistemic: make([]float32, mw*mh)}}
}

// fill sets frame k: seq k, capture t0 + k/fps.
func (s *synthFrame) fill(k int, t0 time.Time, fps float64) *Frame {
	f := &s.Frame
	f.Seq = uint64(k)
	f.Capture = t0.Add(time.Duration(float64(k) * float64(time.Second) / fps))
	for y := range f.Height {
		for x := range f.Width {
			i := 3 * (y*f.Width + x)
			f.RGB[i] = uint8((x + 3*k) % 256)
			f.RGB[i+1] = uint8((y*2 + k) % 256)
			f.RGB[i+2] = uint8(128 + 100*math.Sin(float64(x+y)/17))
		}
	}
	for i := range f.Depth {
		f.Depth[i] = 2 + float32(i%f.MapWidth)/8 + float32(k)
		f.Scale[i] = 0.05 + float32(i%7)/100
		f.Epistemic[i] = float32(i%97)/97 + 1e-3
	}
	return f
}

func closeRec(t testing.TB, r *Recorder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitIdle waits until the recorder has taken every queued frame.
func waitIdle(t testing.TB, r *Recorder) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for len(r.frames) > 0 || len(r.free) < cap(r.free) || len(r.ctrl) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("recorder did not drain its queue")
		}
		time.Sleep(time.Millisecond)
	}
}
