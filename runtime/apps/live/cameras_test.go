package live

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/service/control"
)

// writeFrames writes n 64x32 PNG frames into dir (an image sequence
// camera).
func writeFrames(t testing.TB, dir string, n int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		img := image.NewRGBA(image.Rect(0, 0, 64, 32))
		for y := range 32 {
			for x := range 64 {
				img.Set(x, y, color.RGBA{uint8(x*4 + i*9), uint8(y * 8), uint8(x * y), 255})
			}
		}
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%03d.png", i)), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// firstFrame waits for the first assessed frame of camera (OnFrame) and
// returns when it came.
func firstFrame(t *testing.T, r *rig, camera string, within time.Duration) time.Time {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case c := <-r.frames:
			if c == camera {
				return time.Now()
			}
		case <-deadline:
			t.Fatalf("no frame of camera %s within %v", camera, within)
		}
	}
}

// TestControlCameras: cameras are added (POST /api/cameras, a cameras
// item as JSON) and removed (DELETE /api/cameras/{camera}) while the
// pipeline runs. Invalid requests get 4xx naming the failing key and
// change nothing (pipeline, file, live channels); an added camera's
// first frame is assessed and its first event queued within 3 s of the
// request, its Foxglove channels are advertised, and with ?persist=1
// it is in the file, which still loads; a removed camera leaves the
// pipeline, the live view and the file (its thresholds and profile
// entries with it); the last camera cannot be removed.
func TestControlCameras(t *testing.T) {
	r := startRig(t, twoCameras+"thresholds: {front: {tau_e: 0.2}}\n", 10)
	api := "http://" + r.srv.Addr() + "/api"
	writeFrames(t, filepath.Join(r.dir, "rear-frames"), 3)
	firstFrame(t, r, "left", 10*time.Second)
	before, _ := os.ReadFile(r.path)
	for _, c := range []struct {
		method, path, body string
		code               int
		msg                string
	}{
		{"POST", "/cameras", `{"name": "rear", "urll": "rtsp://127.0.0.1/r"}`, 400, "urll"},
		{"POST", "/cameras", `{"name": "rear", "url": `, 400, "camera:"},
		{"POST", "/cameras", `{"name": "left", "url": "rtsp://127.0.0.1/r"}`, 409, `cameras[2].name: "left" is also cameras[1].name`},
		{"POST", "/cameras", `{"name": "Rear!", "url": "rtsp://127.0.0.1/r"}`, 422, "cameras[2].name"},
		{"POST", "/cameras", `{"name": "rear", "url": "http://127.0.0.1/r"}`, 422, "cameras[2].url"},
		{"POST", "/cameras", `{"name": "rear", "sequence": {"dir": "nowhere"}}`, 422, "cameras[2].sequence.dir"},
		{"POST", "/cameras", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "zones": [{"name": "a", "polygon": [[0, 0], [1.5, 0], [1, 1]]}]}`, 422, "cameras[2].zones[0].polygon"},
		{"POST", "/cameras", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "calibration": "none.yaml"}`, 422, "cameras[2].calibration"},
		{"POST", "/cameras", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "stall_timeout": "soon"}`, 400, "stall_timeout"},
		{"DELETE", "/cameras/rear", "", 404, `no camera "rear"`},
		{"POST", "/cameras", "{\"name\": \"rear\", \"url\": \"rtsp://127.0.0.1/r\"}\n---\n{\"name\": \"x\"}\n", 400, "trailing data after the body (a second document)"},
		{"POST", "/cameras", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "zones": [{"name": "a", "polygon": [[0, 0], [0.5], [1, 1]]}]}`, 400, "want 2 elements but got 1"},
	} {
		code, body := call(t, c.method, api+c.path+"?persist=1", c.body, "")
		if code != c.code || !strings.Contains(body, c.msg) {
			t.Errorf("%s %s %s: %d %s, want %d naming %q", c.method, c.path, c.body, code, body, c.code, c.msg)
		}
	}
	// A page of another site cannot drive the loopback listener.
	req, _ := http.NewRequest("POST", api+"/cameras", strings.NewReader(`{"name": "rear", "url": "rtsp://127.0.0.1/r"}`))
	req.Header.Set("Origin", "https://evil.example")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Fatalf("POST from another origin: %v %v", resp.StatusCode, err)
	}
	if after, _ := os.ReadFile(r.path); string(after) != string(before) {
		t.Fatalf("refused changes wrote the file:\n%s", after)
	}
	if got := strings.Join(r.p.Cameras(), ","); got != "front,left" || len(*r.srv.cams.Load()) != 2 {
		t.Fatalf("refused changes changed the cameras: %s, live channels of %d", got, len(*r.srv.cams.Load()))
	}
	if got := r.ctl.Refused(); got != 12 {
		t.Errorf("refused %d, want 12", got)
	}

	asked := time.Now()
	code, body := call(t, "POST", api+"/cameras?persist=1",
		`{"name": "rear", "sequence": {"dir": "rear-frames", "fps": 10, "loop": true}, "calibration": "alarm.yaml", "zones": [{"name": "near", "polygon": [[0, 0.5], [1, 0.5], [1, 1], [0, 1]]}]}`, "")
	if code != 200 {
		t.Fatalf("POST camera: %d %s", code, body)
	}
	frame := firstFrame(t, r, "rear", 10*time.Second)
	var event time.Time
	for deadline := time.Now().Add(10 * time.Second); event.IsZero() && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, ev := range r.p.Events() {
			if ev.Camera == "rear" && ev.Seq > 0 {
				event = time.Now()
			}
		}
	}
	t.Logf("POST /api/cameras: first frame of the camera assessed %v, its first event queued by %v after the request",
		frame.Sub(asked).Round(time.Millisecond), event.Sub(asked).Round(time.Millisecond))
	if event.IsZero() || event.Sub(asked) > 3*time.Second {
		t.Fatalf("the added camera's first event %v after the request (goal 3 s)", event.Sub(asked))
	}
	var reply struct {
		Cameras []control.CameraInfo `json:"cameras"`
	}
	if err := json.Unmarshal([]byte(body), &reply); err != nil || len(reply.Cameras) != 3 || reply.Cameras[2].Name != "rear" ||
		reply.Cameras[2].Zones.Zones[0].Name != "near" {
		t.Fatalf("POST reply: %s", body)
	}
	if got := strings.Join(r.p.Cameras(), ","); got != "front,left,rear" || (*r.srv.cams.Load())["rear"] == nil {
		t.Fatalf("after the add: cameras %s, live channels %v", got, *r.srv.cams.Load())
	}
	cfg, err := runconfig.Load(r.path)
	if err != nil {
		t.Fatalf("the written file does not load: %v", err)
	}
	if len(cfg.Cameras) != 3 || cfg.Cameras[2].Name != "rear" || cfg.Cameras[2].Sequence == nil ||
		cfg.Cameras[2].Sequence.Dir != filepath.Join(r.dir, "rear-frames") || len(cfg.Cameras[2].Zones) != 1 {
		t.Fatalf("file after the add: %+v", cfg.Cameras)
	}
	written, _ := os.ReadFile(r.path)
	if !strings.Contains(string(written), "    polygon: [[0, 0.5], [1, 0.5], [1, 1], [0, 1]]") {
		t.Errorf("the file's new item is not in the file's style:\n%s", written)
	}

	// Remove front: gone from the pipeline, the live view and the file,
	// its thresholds and its profile entry with it.
	if code, body := call(t, "DELETE", api+"/cameras/front?persist=1", "", ""); code != 200 {
		t.Fatalf("DELETE front: %d %s", code, body)
	}
	if got := strings.Join(r.p.Cameras(), ","); got != "left,rear" || (*r.srv.cams.Load())["front"] != nil {
		t.Fatalf("after the removal: cameras %s, live channels %v", got, *r.srv.cams.Load())
	}
	cfg, err = runconfig.Load(r.path)
	if err != nil {
		t.Fatalf("the written file does not load: %v", err)
	}
	if len(cfg.Cameras) != 2 || cfg.Cameras[0].Name != "left" || cfg.Cameras[1].Name != "rear" || len(cfg.Thresholds) != 0 ||
		len(cfg.Profiles["night"].Cameras) != 0 {
		t.Fatalf("file after the removal: %+v %+v %+v", cfg.Cameras, cfg.Thresholds, cfg.Profiles)
	}
	if code, body := call(t, "DELETE", api+"/cameras/left", "", ""); code != 200 {
		t.Fatalf("DELETE left: %d %s", code, body)
	}
	if code, body := call(t, "DELETE", api+"/cameras/rear", "", ""); code != 409 || !strings.Contains(body, `"rear" is the only camera`) {
		t.Fatalf("DELETE the last camera: %d %s", code, body)
	}
	if got := r.ctl.Applied(); got != 3 {
		t.Errorf("applied %d, want 3", got)
	}
	// left was removed in memory only: the file keeps it.
	if cfg, err = runconfig.Load(r.path); err != nil || len(cfg.Cameras) != 2 {
		t.Fatalf("file after an in-memory removal: %v %+v", err, cfg)
	}
}

// TestControlAddCameraSingleForm: a file in the single camera form
// becomes a cameras list when a camera is added with ?persist=1: its
// camera section the first item, named alerts.camera, which goes.
func TestControlAddCameraSingleForm(t *testing.T) {
	single := `camera: {url: "rtsp://127.0.0.1:1/unused"}
` + testmodels.RuntimeConfig + `alerts:
  vehicle: v
  camera: front
  calibration: quiet.yaml
  grid: {rows: 1, cols: 2}
  mqtt: {broker: embedded, client_id: c}
  outbox: {dir: outbox}
  embedded: {listen: "127.0.0.1:0", allow_anonymous: true}
http: {listen: "off"}
live: {listen: "127.0.0.1:0"}
`
	r := startRig(t, single, 10)
	writeFrames(t, filepath.Join(r.dir, "side"), 2)
	firstFrame(t, r, "front", 10*time.Second)
	api := "http://" + r.srv.Addr() + "/api"
	if code, body := call(t, "POST", api+"/cameras?persist=1", `{"name": "side", "sequence": {"dir": "side", "fps": 10, "loop": true}}`, ""); code != 200 {
		t.Fatalf("POST camera: %d %s", code, body)
	}
	firstFrame(t, r, "side", 10*time.Second)
	firstFrame(t, r, "front", 10*time.Second)
	cfg, err := runconfig.Load(r.path)
	if err != nil {
		t.Fatalf("the written file does not load: %v", err)
	}
	if len(cfg.Cameras) != 2 || cfg.Cameras[0].Name != "front" || cfg.Cameras[0].URL != "rtsp://127.0.0.1:1/unused" || cfg.Cameras[1].Name != "side" ||
		cfg.AlertsConfig.Camera != "" || cfg.AlertsConfig.Grid == nil {
		t.Fatalf("file after the add: %+v, alerts.camera %q", cfg.Cameras, cfg.AlertsConfig.Camera)
	}
	// The zones API finds the first camera in the converted file.
	if code, body := call(t, "PUT", api+"/cameras/front/zones?persist=1", `{"grid": {"rows": 1, "cols": 3}}`, ""); code != 200 {
		t.Fatalf("PUT zones: %d %s", code, body)
	}
	if cfg, err = runconfig.Load(r.path); err != nil || cfg.Cameras[0].Grid == nil || cfg.Cameras[0].Grid.Cols != 3 {
		t.Fatalf("file after PUT zones: %v %+v", err, cfg)
	}
}
