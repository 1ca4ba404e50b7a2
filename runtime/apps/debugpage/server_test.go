package debugpage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/jpeg"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/snapshot"
	"github.com/didoedge/didoedge/internal/colormap"
	"github.com/didoedge/didoedge/runtime/service"
	"github.com/didoedge/didoedge/runtime/stream"
)

// fakePipeline stands in for *stream.Pipeline: the tests script its
// frames, zone levels and events.
type fakePipeline struct {
	mu        sync.RWMutex
	snap      stream.Snapshot
	events    []stream.EventRecord
	metrics   *stream.Metrics
	cam       *stream.CameraMetrics
	rear      *stream.Snapshot // a second camera, "rear", when set (addRear)
	ready     bool
	watched   int
	sick      string // a failing health check's detail; "" when healthy
	degraded  bool   // camera rear degraded, the pipeline healthy
	snapshots map[string][]byte
}

func (f *fakePipeline) Health() stream.Health {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.sick != "" {
		return stream.Health{OK: false, Status: "failed", Checks: []stream.HealthCheck{{Name: "models", OK: true, Critical: true, Detail: "loaded"},
			{Name: "frames", OK: false, Critical: true, Detail: f.sick}}}
	}
	if f.degraded {
		return stream.Health{OK: true, Status: "degraded", Degraded: []string{"camera rear"},
			Checks: []stream.HealthCheck{{Name: "frames", OK: true, Critical: true, Detail: "1 of 2 cameras"},
				{Name: "camera", Camera: "rear", OK: false, Detail: "last frame 9s ago (limit 2s)"}},
			Cameras: []stream.CameraHealth{{Name: "front", State: "ok", Ready: true}, {Name: "rear", State: "degraded", LastFrameAgeMS: 9000, Restarts: 1}}}
	}
	return stream.Health{OK: true, Checks: []stream.HealthCheck{{Name: "frames", OK: true, Detail: "last frame 10ms ago"}}}
}

func newFake(w, h int) *fakePipeline {
	f := &fakePipeline{ready: true, metrics: stream.NewMetrics()}
	f.cam = f.metrics.AddCamera("front")
	s := &f.snap
	s.ImageW, s.ImageH, s.MapW, s.MapH = w, h, w, h
	s.RGB = make([]uint8, 3*w*h)
	s.Depth, s.Scale, s.Epistemic = make([]float32, w*h), make([]float32, w*h), make([]float32, w*h)
	s.Zones = []alerts.Zone{
		{Name: "r0c0", Polygon: [][2]float64{{0, 0}, {0.5, 0}, {0.5, 1}, {0, 1}}},
		{Name: "r0c1", Polygon: [][2]float64{{0.5, 0}, {1, 0}, {1, 1}, {0.5, 1}}},
	}
	s.Levels = make([]alerts.Level, 2)
	s.Status = []alerts.ZoneStatus{{Name: "r0c0", Fused: alerts.Fused{OODFraction: 0.25}}, {Name: "r0c1"}}
	f.snapshots = map[string][]byte{"front-r0c0-1-1": {0xFF, 0xD8, 0xFF, 0xD9}}
	return f
}

// frame draws frame seq: a gradient, depth 2..80 m, b = 0.1*depth,
// epistemic rising left to right.
func (f *fakePipeline) frame(seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &f.snap
	s.Seq, s.Capture = seq, time.Now()
	for y := range s.ImageH {
		for x := range s.ImageW {
			i := y*s.ImageW + x
			s.RGB[3*i], s.RGB[3*i+1], s.RGB[3*i+2] = uint8(x+int(seq)), uint8(y), 128
			s.Depth[i] = 2 + 78*float32(y)/float32(s.ImageH)
			s.Scale[i] = 0.1 * s.Depth[i]
			s.Epistemic[i] = float32(x) / float32(s.ImageW)
		}
	}
}

func (f *fakePipeline) setLevel(zone int, l alerts.Level) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snap.Levels[zone] = l
	f.events = append(f.events, stream.EventRecord{Seq: uint64(len(f.events) + 1), Camera: "front", Type: "new", Kind: "zone",
		Zone: f.snap.Zones[zone].Name, Level: l.String(), Previous: "ok", Reasons: "ood_fraction"})
}

func (f *fakePipeline) Watch() { f.mu.Lock(); f.watched++; f.mu.Unlock() }

// addRear adds a second camera, "rear", with a w x h frame and zone r0c0
// critical.
func (f *fakePipeline) addRear(w, h int) {
	r := &stream.Snapshot{Seq: 1, Capture: time.Now(), ImageW: w, ImageH: h, MapW: w, MapH: h, RGB: make([]uint8, 3*w*h),
		Depth: make([]float32, w*h), Scale: make([]float32, w*h), Epistemic: make([]float32, w*h)}
	for i := range r.Depth {
		r.Depth[i], r.Scale[i], r.Epistemic[i] = 10, 1, 0.9
	}
	r.Zones = []alerts.Zone{{Name: "r0c0", Polygon: [][2]float64{{0, 0}, {1, 0}, {1, 1}, {0, 1}}}}
	r.Levels = []alerts.Level{alerts.LevelCritical}
	r.Status = []alerts.ZoneStatus{{Name: "r0c0", Level: alerts.LevelCritical}}
	f.mu.Lock()
	f.rear = r
	f.mu.Unlock()
	f.metrics.AddCamera("rear")
}

func (f *fakePipeline) Cameras() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.rear != nil {
		return []string{"front", "rear"}
	}
	return []string{"front"}
}
func (f *fakePipeline) ViewCamera(name string, fn func(*stream.Snapshot)) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	switch {
	case name == "front":
		fn(&f.snap)
	case name == "rear" && f.rear != nil:
		fn(f.rear)
	default:
		return false
	}
	return true
}
func (f *fakePipeline) CameraReady() map[string]bool {
	return map[string]bool{"front": f.Ready(), "rear": f.Ready()}
}
func (f *fakePipeline) Events() []stream.EventRecord {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return append([]stream.EventRecord(nil), f.events...)
}
func (f *fakePipeline) Metrics() *stream.Metrics { return f.metrics }
func (f *fakePipeline) EventSnapshot(id string) ([]byte, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if b, ok := f.snapshots[id]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("%w: %s", snapshot.ErrNotFound, id)
}
func (f *fakePipeline) Ready() bool { f.mu.RLock(); defer f.mu.RUnlock(); return f.ready }

func startServer(t *testing.T, p Pipeline) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := Start(ctx, "127.0.0.1:0", p, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); srv.Close() })
	return "http://" + srv.Addr()
}

func get(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestEndpoints(t *testing.T) {
	f := newFake(64, 32)
	f.frame(1)
	f.cam.Dropped.Add(2)
	base := startServer(t, f)
	tests := []struct {
		path        string
		status      int
		contentType string
		contains    string
	}{
		{"/", 200, "text/html; charset=utf-8", `id="img-epistemic"`},
		{"/metrics", 200, "text/plain; version=0.0.4; charset=utf-8; escaping=underscores", `didoedge_frames_dropped_total{camera="front"} 2`},
		{"/healthz", 200, "text/plain; charset=utf-8", "ok\nframes: ok last frame 10ms ago"},
		{"/readyz", 200, "text/plain; charset=utf-8", "ready\ncamera front: ready\n"},
		{"/api/state?camera=front", 200, "application/json", `"cameras":[{"name":"front"`},
		{"/api/state?camera=rear", 404, "", "unknown camera"},
		{"/img/frame.jpg?camera=rear", 404, "", ""},
		{"/api/state", 200, "application/json", `"name":"r0c1"`},
		{"/api/state", 200, "application/json", `"fused_ood":0.25`},
		{"/api/events/front-r0c0-1-1/snapshot.jpg", 200, "image/jpeg", "\xff\xd8\xff\xd9"},
		{"/api/events/front-r0c0-9-9/snapshot.jpg", 404, "", "snapshot not found"},
		{"/img/nothing.jpg", 404, "", ""},
		{"/nope", 404, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			resp, body := get(t, base+tc.path)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.contentType != "" && resp.Header.Get("Content-Type") != tc.contentType {
				t.Fatalf("content type %q, want %q", resp.Header.Get("Content-Type"), tc.contentType)
			}
			if !bytes.Contains(body, []byte(tc.contains)) {
				t.Fatalf("body does not contain %q:\n%.400s", tc.contains, body)
			}
		})
	}
	for _, name := range []string{"frame", "depth", "aleatoric", "epistemic"} {
		resp, body := get(t, base+"/img/"+name+".jpg")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/jpeg" {
			t.Fatalf("%s: status %d type %q", name, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		img, err := jpeg.Decode(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() != 64 || b.Dy() != 32 {
			t.Fatalf("%s: %v, want 64x32", name, b)
		}
	}
	f.mu.Lock()
	f.ready = false
	watched := f.watched
	f.mu.Unlock()
	if resp, _ := get(t, base+"/readyz"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readyz %d while not ready", resp.StatusCode)
	}
	f.mu.Lock()
	f.sick = "last frame 9s ago (limit 2s)"
	f.mu.Unlock()
	if resp, body := get(t, base+"/healthz"); resp.StatusCode != http.StatusServiceUnavailable ||
		!strings.Contains(string(body), "unhealthy\n") || !strings.Contains(string(body), "frames: FAIL last frame 9s ago (limit 2s)") {
		t.Fatalf("healthz %d %q while the pipeline fails", resp.StatusCode, body)
	}
	if watched < 5 {
		t.Fatalf("state and image requests called Watch %d times, want 5", watched)
	}
	// One camera degraded: /healthz passes (the unit is not restarted)
	// and says what is degraded, in text and JSON; /readyz fails and its
	// JSON names the camera's state.
	f.mu.Lock()
	f.sick, f.degraded = "", true
	f.mu.Unlock()
	if resp, body := get(t, base+"/healthz"); resp.StatusCode != 200 || !strings.HasPrefix(string(body), "degraded: camera rear\n") ||
		!strings.Contains(string(body), "camera: DEGRADED camera rear: last frame 9s ago") {
		t.Fatalf("healthz %d %q with a degraded camera", resp.StatusCode, body)
	}
	resp, body := get(t, base+"/healthz?format=json")
	var h stream.Health
	if err := json.Unmarshal(body, &h); err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" ||
		!h.OK || h.Status != "degraded" || len(h.Cameras) != 2 || h.Cameras[1].State != "degraded" || h.Cameras[1].Restarts != 1 {
		t.Fatalf("healthz JSON %d %q: %+v %v", resp.StatusCode, body, h, err)
	}
	req, _ := http.NewRequest("GET", base+"/readyz", nil)
	req.Header.Set("Accept", "application/json")
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Body.Close()
	var rd struct {
		Ready   bool                  `json:"ready"`
		Cameras []stream.CameraHealth `json:"cameras"`
	}
	if err := json.NewDecoder(r2.Body).Decode(&rd); err != nil || r2.StatusCode != http.StatusServiceUnavailable || rd.Ready || len(rd.Cameras) != 2 || rd.Cameras[1].Name != "rear" {
		t.Fatalf("readyz JSON %d: %+v %v", r2.StatusCode, rd, err)
	}
}

// TestEpistemicColours: the heat map follows the ramp (K/S 0 is dark
// blue, 1 is red), decoded from the JPEG within compression error.
func TestEpistemicColours(t *testing.T) {
	f := newFake(64, 32)
	f.frame(1)
	base := startServer(t, f)
	_, body := get(t, base+"/img/epistemic.jpg")
	img, err := jpeg.Decode(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		x       int
		r, g, b uint8
	}{{1, 20, 20, 120}, {62, 220, 30, 30}} {
		want := [3]uint8{}
		want[0], want[1], want[2] = colormap.Heat(float64(tc.x) / 64)
		r, g, b, _ := img.At(tc.x, 16).RGBA()
		got := [3]int{int(r >> 8), int(g >> 8), int(b >> 8)}
		for c := range 3 {
			if d := got[c] - int(want[c]); d < -24 || d > 24 {
				t.Fatalf("x=%d: colour %v, want about %v", tc.x, got, want)
			}
		}
	}
	if r, g, b := colormap.Heat(0); r != 20 || g != 20 || b != 120 {
		t.Fatalf("colormap.Heat(0) = %d,%d,%d", r, g, b)
	}
	if r, g, b := colormap.Heat(1); r != 220 || g != 30 || b != 30 {
		t.Fatalf("colormap.Heat(1) = %d,%d,%d", r, g, b)
	}
	// With tau_e 0.25 the ramp spans 0 to 0.5: K/S = tau_e (x = 16) is
	// the middle colour, green.
	f.mu.Lock()
	f.snap.TauE = 0.25
	f.mu.Unlock()
	_, body = get(t, base+"/img/epistemic.jpg")
	if img, err = jpeg.Decode(bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	r, g, b, _ := img.At(16, 16).RGBA()
	if wr, wg, wb := colormap.Heat(0.5); absDiff(int(r>>8), int(wr)) > 24 || absDiff(int(g>>8), int(wg)) > 24 || absDiff(int(b>>8), int(wb)) > 24 {
		t.Fatalf("K/S = tau_e drawn %d,%d,%d, want about %d,%d,%d", r>>8, g>>8, b>>8, wr, wg, wb)
	}
	if !strings.Contains(string(indexHTML), "polygon.critical") {
		t.Fatal("page has no style for critical zones")
	}
}

func absDiff(a, b int) int {
	if a > b {
		return a - b
	}
	return b - a
}

// TestStartingHealth: between Listen and Attach (models loading) /healthz
// answers 200 "starting" within the grace and 503 after it; the other
// endpoints answer 503.
func TestStartingHealth(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := service.Listen(ctx, "127.0.0.1:0", 400*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := "http://" + s.Addr()
	if resp, body := get(t, base+"/healthz"); resp.StatusCode != 200 || !strings.HasPrefix(string(body), "starting\n") {
		t.Fatalf("healthz while starting: %d %q", resp.StatusCode, body)
	}
	if resp, _ := get(t, base+"/readyz"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readyz while starting: %d", resp.StatusCode)
	}
	time.Sleep(500 * time.Millisecond)
	if resp, body := get(t, base+"/healthz"); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "FAIL still loading models") {
		t.Fatalf("healthz past the grace: %d %q", resp.StatusCode, body)
	}
	f := newFake(64, 32)
	s.Attach(f, Handler(f))
	if resp, body := get(t, base+"/healthz"); resp.StatusCode != 200 || !strings.HasPrefix(string(body), "ok\n") {
		t.Fatalf("healthz after Attach: %d %q", resp.StatusCode, body)
	}
	// A second Listen on the same address names the key.
	if _, err := service.Listen(ctx, s.Addr(), time.Second, nil); err == nil || !strings.Contains(err.Error(), "http.listen "+s.Addr()) {
		t.Fatalf("second listen: %v", err)
	}
}
