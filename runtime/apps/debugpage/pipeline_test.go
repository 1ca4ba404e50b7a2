package debugpage

import (
	"bytes"
	"encoding/json"
	"image/jpeg"
	"net/http"
	"testing"
	"time"
)

// TestRealPipelineSnapshots serves the page from a running pipeline (seeded
// test models, synthetic 20 fps camera): once a client asks, the pipeline
// fills its snapshot, the frame image has the model's size and the maps the
// camera frame's; /metrics shows the frames; /readyz turns ready; an
// event's snapshot (the random-weight models alarm) is served at the path
// the event names.
func TestRealPipelineSnapshots(t *testing.T) {
	dir := t.TempDir()
	cfg := testRuntime(t, dir, 2, 3, "  snapshots: {dir: snapshots}\n", "http: {listen: \"127.0.0.1:0\", max_fps: 10}\n")
	ctx, p, mb := startPipeline(t, cfg)
	feedFrames(ctx, mb, 128, 64, 1, 50*time.Millisecond) // a 20 fps camera at twice the model size (the pipeline resizes)
	base := startServer(t, p)
	var st State
	deadline := time.Now().Add(20 * time.Second)
	for st.Seq == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot within 20 s: %+v", st)
		}
		_, body := get(t, base+"/api/state")
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(st.Zones) != 6 || st.Zones[0].Name != "r0c0" || !st.Ready {
		t.Fatalf("state %+v", st)
	}
	for _, name := range []string{"frame", "depth", "aleatoric", "epistemic"} {
		resp, body := get(t, base+"/img/"+name+".jpg")
		img, err := jpeg.Decode(bytes.NewReader(body))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: status %d, %v", name, resp.StatusCode, err)
		}
		// The frame is the model's input (64x32); the maps come back at
		// the camera frame's size (128x64).
		w, h := 128, 64
		if name == "frame" {
			w, h = 64, 32
		}
		if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
			t.Fatalf("%s: %v, want %dx%d", name, b, w, h)
		}
	}
	_, metrics := get(t, base+"/metrics")
	if !bytes.Contains(metrics, []byte(`didoedge_provider_info{model="depth",provider="cpu"} 1`)) ||
		!bytes.Contains(metrics, []byte("didoedge_snapshots_failed_total 0\n")) ||
		bytes.Contains(metrics, []byte("didoedge_frames_total 0\n")) {
		t.Fatalf("metrics:\n%s", metrics)
	}
	// The snapshot follows the camera: a later state has a later frame.
	first := st.Seq
	time.Sleep(500 * time.Millisecond)
	_, body := get(t, base+"/api/state")
	json.Unmarshal(body, &st)
	if st.Seq <= first {
		t.Fatalf("snapshot stuck at frame %d", st.Seq)
	}
	if resp, _ := get(t, base+"/readyz"); resp.StatusCode != 200 {
		t.Fatalf("readyz %d while frames flow", resp.StatusCode)
	}
	var snap string
	for deadline := time.Now().Add(20 * time.Second); snap == "" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, body := get(t, base+"/api/state")
		json.Unmarshal(body, &st)
		for _, ev := range st.Events {
			if ev.Snapshot != "" && ev.Snapshot == "/api/events/"+ev.Episode+"/snapshot.jpg" {
				snap = ev.Snapshot
			}
		}
	}
	if snap == "" {
		t.Fatalf("no event named a snapshot within 20 s: %+v", st.Events)
	}
	var resp *http.Response
	var body2 []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, body2 = get(t, base+snap); resp.StatusCode == 200 {
			break // rendered off the frame path: shortly after the event
		}
	}
	img, err := jpeg.Decode(bytes.NewReader(body2))
	if err != nil || resp.Header.Get("Content-Type") != "image/jpeg" {
		t.Fatalf("%s: status %d, %v", snap, resp.StatusCode, err)
	}
	if b := img.Bounds(); b.Dx() != 64 || b.Dy() != 32 {
		t.Fatalf("snapshot %v, want the model input's 64x32", b)
	}
}
