package record

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts/schema"
	"github.com/didoedge/didoedge/runtime/record/mcaprec"
)

// smallRecording writes a recording of 3 frames and 2 events.
func smallRecording(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	ev, err := schema.Raw(schema.Event)
	if err != nil {
		tb.Fatal(err)
	}
	rec, err := New(Config{Mode: ModeContinuous, Dir: dir, Queue: 8, Maps: []string{}},
		Options{Streams: []JSONStream{{Name: "events", SchemaName: "didoedge.event/1", Schema: ev}},
			Metadata: map[string]map[string]string{mcaprec.ModelsMetadata: {"depth_sha256": "aa"}}})
	if err != nil {
		tb.Fatal(err)
	}
	rgb := make([]uint8, 8*4*3)
	for k := 1; k <= 3; k++ {
		at := time.Unix(1_800_000_000, int64(k)*1e8)
		rec.Frame(&Frame{Camera: "front", Seq: uint64(k), Capture: at, Width: 8, Height: 4, RGB: rgb})
		if k > 1 {
			typ := map[int]string{2: "new", 3: "end"}[k]
			rec.JSON("front", "events", at, []byte(`{"schema":"didoedge.event/1","seq":1,"id":"front-z-1-1","type":"`+typ+
				`","kind":"zone","vehicle":"v","camera":"front","zone":"z","level":"warn","previous_level":"ok","reasons":[],"start_ms":1,"time_ms":1,"frame_seq":2}`))
		}
	}
	if err := rec.Close(context.Background()); err != nil {
		tb.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.mcap"))
	if len(files) != 1 {
		tb.Fatalf("recordings %v", files)
	}
	return files[0]
}

func TestReadRecording(t *testing.T) {
	r, err := ReadRecording(smallRecording(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Camera != "front" || r.Frames != 3 || r.FirstSeq != 1 || r.LastSeq != 3 || len(r.Events) != 2 || eventType(t, r.Events[0]) != "new" ||
		r.Models["depth_sha256"] != "aa" || r.Truncated || r.Last.Sub(r.First) != 200*time.Millisecond {
		t.Fatalf("recording %+v", r)
	}
	if _, err := ReadRecording(r.Path, "rear"); err == nil {
		t.Fatal("a camera without frames was accepted")
	}
}

// FuzzRead: damaged recordings give errors, never a panic; what reads has
// frames.
func FuzzReadRecording(f *testing.F) {
	data, err := os.ReadFile(smallRecording(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add([]byte("\x89MCAP0\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "f.mcap")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := ReadRecording(path, "")
		if err == nil && r.Frames == 0 {
			t.Fatalf("read a recording without frames: %+v", r)
		}
	})
}

// eventType is the "type" field of a recorded event's payload.
func eventType(t *testing.T, e RecordedEvent) string {
	t.Helper()
	var v struct {
		Type string `json:"type"`
	}
	if err := e.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v.Type
}
