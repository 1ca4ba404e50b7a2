package record

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts/schema"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/internal/mcapcheck"
	"github.com/didoedge/didoedge/runtime/record/mcaprec"
	"github.com/didoedge/didoedge/runtime/record/mcapsource"
)

func eventJSON(seq int, camera string, frameSeq int, t time.Time) []byte {
	return fmt.Appendf(nil, `{"schema":"didoedge.event/1","seq":%d,"id":"%s-road-%d-1","type":"new","kind":"zone","vehicle":"van_07","camera":"%s","zone":"road","level":"critical","previous_level":"ok","reasons":["ood_fraction"],"start_ms":%d,"time_ms":%d,"frame_seq":%d}`,
		seq, camera, t.UnixMilli(), camera, t.UnixMilli(), t.UnixMilli(), frameSeq)
}

func stateJSON(camera string, t time.Time) []byte {
	return fmt.Appendf(nil, `{"schema":"didoedge.state/1","vehicle":"van_07","camera":"%s","zone":"road","level":"warn","since_ms":%d,"time_ms":%d}`,
		camera, t.UnixMilli(), t.UnixMilli())
}

// TestContinuousRoundTrip records frames of two cameras with events and
// states, then reads the file with Foxglove's @mcap/core (summary and
// stream), with the Go replay source and Reader, and compares.
func TestContinuousRoundTrip(t *testing.T) {
	for _, format := range []string{"jpeg", "png"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Mode: ModeContinuous, Dir: dir, FrameFormat: format, Queue: 64, Compression: "zstd", MapMantissaBits: 23}
			models := map[string]map[string]string{mcaprec.ModelsMetadata: {"depth_sha256": "abc", "auxue_sha256": "def"}}
			rec, err := New(cfg, Options{Streams: testStreams(t), Metadata: models})
			if err != nil {
				t.Fatal(err)
			}
			if err := rec.SetCamera("front", Intrinsics{Width: 64, Height: 32, Fx: 50, Fy: 51, Cx: 31.5, Cy: 15.5}); err != nil {
				t.Fatal(err)
			}
			t0 := time.Unix(1_800_000_000, 123_000_000)
			front, rear := newSynth("front", 64, 32, 32, 16), newSynth("rear", 48, 24, 24, 12)
			const n = 20
			var want [][]uint8
			for k := 1; k <= n; k++ {
				f := front.fill(k, t0, 15)
				want = append(want, append([]uint8(nil), f.RGB...))
				if !rec.Frame(f) {
					t.Fatalf("frame %d dropped with a queue of %d", k, cfg.Queue)
				}
				r := rear.fill(k, t0, 15)
				r.Depth = nil // the rear camera records no depth
				if !rec.Frame(r) {
					t.Fatalf("rear frame %d dropped", k)
				}
				if k%5 == 0 {
					rec.JSON("front", "events", f.Capture, eventJSON(k/5, "front", k, f.Capture))
					rec.JSON("front", "zone_states", f.Capture, stateJSON("front", f.Capture))
				}
				waitIdle(t, rec) // keep the queue short of full
			}
			closeRec(t, rec)
			st := rec.Stats()
			if st.FramesDropped != 0 || st.FramesWritten != 2*n || st.FilesClosed != 1 || st.WriteErrors != 0 {
				t.Fatalf("stats %+v", st)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "rec-*.mcap"))
			if len(files) != 1 {
				t.Fatalf("files %v", files)
			}
			if fi, _ := os.Stat(files[0]); uint64(fi.Size()) != st.BytesWritten {
				t.Errorf("BytesWritten %d, file has %d", st.BytesWritten, fi.Size())
			}

			// Foxglove's reader.
			rep := mcapcheck.Check(t, files[0])
			wantCounts := map[string]int{
				"/front/image": n, "/front/depth": n, "/front/laplace_scale": n, "/front/epistemic": n,
				"/front/camera_calibration": 1, "/front/events": n / 5, "/front/zone_states": n / 5,
				"/rear/image": n, "/rear/laplace_scale": n, "/rear/epistemic": n,
			}
			if fmt.Sprint(rep.Counts) != fmt.Sprint(wantCounts) {
				t.Errorf("counts %v, want %v", rep.Counts, wantCounts)
			}
			if rep.Library != mcaprec.LibraryName {
				t.Errorf("library %q", rep.Library)
			}
			img := rep.Decoded["/front/image"]
			if img["format"] != format || img["frame_id"] != "front" {
				t.Errorf("decoded image %v", img)
			}
			if ts := img["timestamp"].(map[string]any); ts["sec"].(float64) != 1_800_000_000 || ts["nsec"].(float64) != 189_666_666 {
				t.Errorf("image timestamp %v", ts)
			}
			depth := rep.Decoded["/front/depth"]
			if depth["encoding"] != "32FC1" || depth["width"].(float64) != 32 || depth["height"].(float64) != 16 || depth["step"].(float64) != 128 {
				t.Errorf("decoded depth %v", depth)
			}
			if d := depth["data"].(map[string]any); d["bytes"].(float64) != 32*16*4 {
				t.Errorf("depth data %v", d)
			}
			// First depth value of frame 1: 2 + 0/8 + 1 = 3.0 = 0x40400000 little-endian.
			if h := fmt.Sprint(depth["data"].(map[string]any)["head"]); h != "[0 0 64 64 0 0 72 64]" {
				t.Errorf("depth head bytes %s, want 3.0 then 3.125", h)
			}
			cal := rep.Decoded["/front/camera_calibration"]
			if fmt.Sprint(cal["K"]) != "[50 0 31.5 0 51 15.5 0 0 1]" || cal["width"].(float64) != 64 {
				t.Errorf("calibration %v", cal)
			}
			if ev := rep.Decoded["/front/events"]; ev["frame_seq"].(float64) != 5 || rep.Schemas["didoedge.event/1"] != "jsonschema" {
				t.Errorf("event %v, schemas %v", ev, rep.Schemas)
			}
			if seqs := rep.Sequences["/front/image"]; len(seqs) != n || seqs[0] != 1 || seqs[n-1] != n {
				t.Errorf("image sequences %v", seqs)
			}
			var mdNames []string
			for _, m := range rep.Metadata {
				mdNames = append(mdNames, m.Name)
			}
			if fmt.Sprint(mdNames) != "[didoedge didoedge.models]" {
				t.Errorf("metadata %v", mdNames)
			}

			// Replay: exact times and sequence numbers; pixels within the codec's tolerance.
			src, err := mcapsource.Open(mcapsource.Config{Path: files[0], Camera: "front"})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			var fr camera.Frame
			for k := 1; ; k++ {
				err := src.Next(t.Context(), &fr)
				if errors.Is(err, io.EOF) {
					if k != n+1 {
						t.Fatalf("replay ended after %d frames", k-1)
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				wantT := t0.Add(time.Duration(float64(k) * float64(time.Second) / 15))
				if fr.Seq != uint64(k) || !fr.Capture.Equal(wantT) || fr.Width != 64 || fr.Height != 32 || fr.SourceID != "front" {
					t.Fatalf("frame %d: seq %d capture %v size %dx%d", k, fr.Seq, fr.Capture, fr.Width, fr.Height)
				}
				mae, maxe := diff(fr.RGB, want[k-1])
				if format == "png" && maxe != 0 {
					t.Fatalf("png frame %d differs (max %d)", k, maxe)
				}
				// JPEG at quality 90 with 4:2:0 chroma: the smooth test picture
				// stays within a mean absolute error of 3 levels.
				if format == "jpeg" && mae > 3 {
					t.Fatalf("jpeg frame %d: mean abs error %.2f", k, mae)
				}
			}
			if src.Truncated() {
				t.Error("complete file reported truncated")
			}

			// The Go reader: maps decode to the recorded values; the JSON
			// messages validate against alerts/schema.
			evSchema, err := schema.Load(schema.Event)
			if err != nil {
				t.Fatal(err)
			}
			rd, err := mcapsource.OpenReader(files[0])
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			var m mcapsource.Message
			var buf []float32
			depths, events := 0, 0
			for {
				if err := rd.Next(&m); err != nil {
					if !errors.Is(err, io.EOF) {
						t.Fatal(err)
					}
					break
				}
				switch m.Topic {
				case "/front/depth":
					depths++
					ri, err := mcaprec.ParseRawImage(m.Data)
					if err != nil {
						t.Fatal(err)
					}
					if buf, err = ri.Float32s(buf); err != nil {
						t.Fatal(err)
					}
					for i, v := range buf {
						if w := 2 + float32(i%32)/8 + float32(depths); v != w {
							t.Fatalf("depth %d pixel %d = %v, want %v", depths, i, v, w)
						}
					}
				case "/front/events":
					events++
					if err := evSchema.Validate(m.Data); err != nil {
						t.Fatalf("event %d: %v", events, err)
					}
				}
			}
			if depths != n || events != n/5 || !rd.Complete() || rd.Truncated() {
				t.Fatalf("Go reader: %d depth maps, %d events, complete %v", depths, events, rd.Complete())
			}
		})
	}
}

func diff(a, b []uint8) (mean float64, maxAbs int) {
	var sum float64
	for i := range a {
		d := int(a[i]) - int(b[i])
		if d < 0 {
			d = -d
		}
		sum += float64(d)
		maxAbs = max(maxAbs, d)
	}
	return sum / math.Max(1, float64(len(a))), maxAbs
}
