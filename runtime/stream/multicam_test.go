package stream

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/testmodels"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// multiConfig turns the single-camera test config into a cameras list:
// cameras is the list's YAML; the alerts section keeps zones (the default
// of cameras without their own) but names no camera.
func multiConfig(t testing.TB, dir, cameras, calibration, zones string) string {
	t.Helper()
	text := fmt.Sprintf(testmodels.ConfigYAML, "  url: rtsp://127.0.0.1:1/unused", calibration, zones)
	text = strings.Replace(text, "camera:\n  url: rtsp://127.0.0.1:1/unused\n", "cameras:\n"+cameras, 1)
	text = strings.Replace(text, "  camera: front\n", "", 1)
	path := filepath.Join(dir, "runtime.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const threeCameras = `  - {name: front, url: "rtsp://127.0.0.1:1/front", calibration: alarm.yaml}
  - {name: left, url: "rtsp://127.0.0.1:1/left"}
  - name: right
    url: rtsp://127.0.0.1:1/right
    zones: [{name: near, polygon: [[0, 0.5], [1, 0.5], [1, 1], [0, 1]]}]
    ignore: [{name: hood, polygon: [[0, 0.9], [1, 0.9], [1, 1], [0, 1]]}]
`

// TestCamerasConfig: a cameras list gives each camera its name, source,
// zones and calibration (the alerts section's by default); every error
// names the camera's key.
func TestCamerasConfig(t *testing.T) {
	s := newTestSetup(t, "quiet.yaml", testmodels.ConfigZones)
	cfg, err := runconfig.Load(multiConfig(t, s.dir, threeCameras, "quiet.yaml", testmodels.ConfigZones))
	if err != nil {
		t.Fatal(err)
	}
	specs, err := cfg.CameraSpecs()
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 3 {
		t.Fatalf("%d cameras, want 3", len(specs))
	}
	for i, want := range []struct {
		name, calibration string
		zones             []string
		ignore            int
	}{
		{"front", "alarm.yaml", []string{"r0c0", "r0c1"}, 0},
		{"left", "quiet.yaml", []string{"r0c0", "r0c1"}, 0},
		{"right", "quiet.yaml", []string{"near"}, 1},
	} {
		cs := specs[i]
		es, err := cs.EngineSpec()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, z := range es.Zones {
			names = append(names, z.Name)
		}
		if cs.Name != want.name || es.Config.Camera != want.name || filepath.Base(cs.Alerts.Calibration) != want.calibration ||
			strings.Join(names, ",") != strings.Join(want.zones, ",") || len(es.Ignore) != want.ignore || cs.Key != fmt.Sprintf("cameras[%d]", i) {
			t.Errorf("camera %d: %s calibration %s zones %v ignore %d key %s, want %+v", i, cs.Name, cs.Alerts.Calibration, names, len(es.Ignore), cs.Key, want)
		}
	}

	for _, tc := range []struct {
		name, cameras, zones string
		extra                string // appended to the file
		want                 []string
	}{
		{"no name", "  - {url: \"rtsp://127.0.0.1:1/a\"}\n", testmodels.ConfigZones, "", []string{"cameras[0].name: empty"}},
		{"bad name", "  - {name: front/x, url: \"rtsp://127.0.0.1:1/a\"}\n", testmodels.ConfigZones, "", []string{"cameras[0].name:", "front/x"}},
		{"duplicate", "  - {name: a, url: \"rtsp://127.0.0.1:1/a\"}\n  - {name: a, url: \"rtsp://127.0.0.1:1/b\"}\n", testmodels.ConfigZones, "",
			[]string{"cameras[1].name: \"a\" is also cameras[0].name"}},
		{"bad url", "  - {name: a, url: \"rtsp://127.0.0.1:1/a\"}\n  - {name: b, url: \"http://x/b\"}\n", testmodels.ConfigZones, "",
			[]string{"cameras[1].url:", "must start with rtsp://"}},
		{"no source", "  - {name: a}\n", testmodels.ConfigZones, "", []string{"cameras[0]: give url (RTSP) or sequence"}},
		{"missing sequence dir", "  - {name: a, sequence: {dir: nowhere}}\n", testmodels.ConfigZones, "", []string{"cameras[0].sequence.dir:", "is not a directory"}},
		{"negative stall", "  - {name: a, url: \"rtsp://127.0.0.1:1/a\", stall_timeout: -1s}\n", testmodels.ConfigZones, "",
			[]string{"cameras[0].stall_timeout: -1s is negative"}},
		{"missing calibration", "  - {name: a, url: \"rtsp://127.0.0.1:1/a\"}\n  - {name: b, url: \"rtsp://127.0.0.1:1/b\", calibration: nope.yaml}\n",
			testmodels.ConfigZones, "", []string{"cameras[1].calibration:", "nope.yaml"}},
		{"bad zone", "  - {name: a, url: \"rtsp://127.0.0.1:1/a\", zones: [{name: z, polygon: [[0, 0], [1, 0]]}]}\n", testmodels.ConfigZones, "",
			[]string{"cameras[0].zones[0].polygon"}},
		{"no zones anywhere", "  - {name: a, url: \"rtsp://127.0.0.1:1/a\", zones: [{name: z, polygon: [[0, 0], [1, 0], [1, 1]]}]}\n  - {name: b, url: \"rtsp://127.0.0.1:1/b\"}\n",
			"", "", []string{"cameras[1].zones: no zones"}},
		{"unknown key", "  - {name: a, url: \"rtsp://127.0.0.1:1/a\", zoom: 2}\n", testmodels.ConfigZones, "", []string{"zoom"}},
		{"camera and cameras", "  - {name: a, url: \"rtsp://127.0.0.1:1/a\"}\n", testmodels.ConfigZones, "camera: {url: \"rtsp://127.0.0.1:1/x\"}\n",
			[]string{"camera and cameras are exclusive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := multiConfig(t, s.dir, tc.cameras, "quiet.yaml", tc.zones)
			if tc.extra != "" {
				data, _ := os.ReadFile(path)
				os.WriteFile(path, append(data, tc.extra...), 0o644)
			}
			_, err := runconfig.Load(path)
			testmodels.MustContain(t, err, tc.want...)
		})
	}
	t.Run("alerts.camera with cameras", func(t *testing.T) {
		path := multiConfig(t, s.dir, "  - {name: a, url: \"rtsp://127.0.0.1:1/a\"}\n", "quiet.yaml", testmodels.ConfigZones)
		data, _ := os.ReadFile(path)
		os.WriteFile(path, []byte(strings.Replace(string(data), "  vehicle: testcar\n", "  vehicle: testcar\n  camera: front\n", 1)), 0o644)
		_, err := runconfig.Load(path)
		testmodels.MustContain(t, err, "alerts: camera: \"front\"", "leave camera out")
	})
}

// startCameras runs a pipeline over one synthetic source per camera.
func startCameras(t *testing.T, path string, fps float64, onEvent func(*alerts.Event)) (*Pipeline, []*synthSource, func() error) {
	t.Helper()
	requireORT(t)
	cfg, err := runconfig.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	specs, _ := cfg.CameraSpecs()
	var srcs []*synthSource
	var sources []camera.Source
	for range specs {
		s := newSynthSource(testW, testH, fps)
		srcs = append(srcs, s)
		sources = append(sources, s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p, err := New(ctx, cfg, Options{Sources: sources, OnEvent: onEvent})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	for _, s := range srcs {
		go s.run(ctx, 0)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(20 * time.Second):
				runErr = errors.New("Run did not return within 20 s of cancellation")
			}
		})
		return runErr
	}
	t.Cleanup(func() { stop() })
	return p, srcs, stop
}

// TestCamerasSharePipeline: three cameras in one pipeline share one
// session per model (the depth session ran exactly the frames of all
// cameras), publish on their own topics through the one MQTT service with
// one seq space, keep their own episodes (only the alarming camera
// raises zone events), and a paused camera raises its own camera fault
// and fails its own health check while the others keep running; it
// recovers when its frames return.
func TestCamerasSharePipeline(t *testing.T) {
	s := newTestSetup(t, "quiet.yaml", testmodels.ConfigZones)
	path := multiConfig(t, s.dir, threeCameras, "quiet.yaml", testmodels.ConfigZones)
	p, srcs, stop := startCameras(t, path, 20, nil)
	sub := subscribe(t, p.BrokerAddr(), "didoedge/testcar/+/events")
	if got := strings.Join(p.Cameras(), ","); got != "front,left,right" {
		t.Fatalf("cameras %s", got)
	}
	for i, c := range p.cams[1:] {
		if c.models.DepthSession() != p.cams[0].models.DepthSession() || c.models.AuxUESession() != p.cams[0].models.AuxUESession() {
			t.Fatalf("camera %d has its own sessions", i+1)
		}
	}
	for _, c := range p.cams {
		if c.direct { // another camera's batch may hold the sessions' input
			t.Fatalf("camera %s stages directly into the shared input", c.spec.Name)
		}
	}
	waitFor(t, 30*time.Second, "critical events of front's zones, and frames on every camera", func() bool {
		c := countEvents(sub.snapshot(), alerts.EventNew, alerts.LevelCritical)
		ready := p.CameraReady()
		return c["r0c0"] == 1 && c["r0c1"] == 1 && ready["front"] && ready["left"] && ready["right"]
	})
	for _, ev := range sub.snapshot() {
		if ev.Camera != "front" {
			t.Fatalf("event of camera %s (quiet calibration): %+v", ev.Camera, ev)
		}
	}

	// Pause left: it alone stalls.
	srcs[1].pause(true)
	paused := time.Now()
	waitFor(t, 10*time.Second, "left's camera fault", func() bool {
		for _, ev := range sub.snapshot() {
			if ev.Kind == alerts.KindCameraFault && ev.Type == alerts.EventNew {
				return true
			}
		}
		return false
	})
	if el := time.Since(paused); el < 2*time.Second-100*time.Millisecond || el > 2*time.Second+time.Second {
		t.Errorf("camera fault %v after the pause, want about camera_stall (2s)", el)
	}
	var fault alerts.Event
	for _, ev := range sub.snapshot() {
		if ev.Kind == alerts.KindCameraFault {
			fault = ev
		}
	}
	if fault.Camera != "left" {
		t.Fatalf("camera fault of %q, want left: %+v", fault.Camera, fault)
	}
	h := p.Health()
	var failingCams []string
	for _, c := range h.Checks {
		if !c.OK {
			failingCams = append(failingCams, c.Name+":"+c.Camera)
		}
	}
	// One paused camera is degraded, not a failure of the pipeline (the
	// unit is not restarted for it).
	if !h.OK || h.Status != "degraded" || strings.Join(failingCams, ",") != "camera:left" {
		t.Fatalf("health with left paused: OK %v status %q failing %v, want OK, degraded, camera:left only", h.OK, h.Status, failingCams)
	}
	frontBefore, rightBefore := p.Metrics().Camera(0).Frames.Load(), p.Metrics().Camera(2).Frames.Load()
	time.Sleep(time.Second)
	if df, dr := p.Metrics().Camera(0).Frames.Load()-frontBefore, p.Metrics().Camera(2).Frames.Load()-rightBefore; df < 10 || dr < 10 {
		t.Fatalf("with left paused, front processed %d and right %d frames in 1 s at 20 fps", df, dr)
	}
	srcs[1].pause(false)
	waitFor(t, 10*time.Second, "left's fault to end and health to return", func() bool {
		for _, ev := range sub.snapshot() {
			if ev.Kind == alerts.KindCameraFault && ev.Type == alerts.EventEnd && ev.Camera == "left" {
				return p.Health().Status == "ok"
			}
		}
		return false
	})
	depth := p.cams[0].models.DepthSession() // Close lets go of the session
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// One session ran every camera's frames: its run count is their sum.
	var total uint64
	for _, cm := range p.Metrics().Cameras() {
		total += cm.Frames.Load() + cm.Invalid.Load()
	}
	if runs := depth.Stats().Frames; runs != total {
		t.Fatalf("depth session ran %d frames, cameras processed %d", runs, total)
	}
	// One outbox, one seq space: the seqs of all cameras' events are
	// distinct.
	seen := map[uint64]string{}
	for _, ev := range sub.snapshot() {
		if prev, dup := seen[ev.Seq]; dup {
			t.Fatalf("seq %d used by %s and %s", ev.Seq, prev, ev.ID)
		}
		seen[ev.Seq] = ev.ID
	}
}

// TestCamerasReload: SIGHUP's reload swaps every camera's zones and
// calibration; a reload that breaks one camera changes none.
func TestCamerasReload(t *testing.T) {
	s := newTestSetup(t, "quiet.yaml", testmodels.ConfigZones)
	path := multiConfig(t, s.dir, threeCameras, "quiet.yaml", testmodels.ConfigZones)
	p, _, stop := startCameras(t, path, 20, nil)
	waitFor(t, 30*time.Second, "frames on every camera", func() bool { return p.Ready() })
	zoneNames := func(cam string) string {
		var n []string
		for _, z := range p.CameraZoneStatus(cam) {
			n = append(n, z.Name)
		}
		return strings.Join(n, ",")
	}
	if a, b, c := zoneNames("front"), zoneNames("left"), zoneNames("right"); a != "r0c0,r0c1" || b != a || c != "near" {
		t.Fatalf("zones before: %s | %s | %s", a, b, c)
	}
	// A broken camera: nothing changes.
	broken := strings.Replace(threeCameras, "name: near", "name: Bad-Name", 1)
	multiConfig(t, s.dir, broken, "quiet.yaml", `  grid: {rows: 1, cols: 3}`)
	if err := p.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "cameras[2].zones[0].name") {
		t.Fatalf("reload of a broken camera: %v", err)
	}
	// Every camera changes: the shared zones become a 1x3 grid, right's own zone is renamed,
	// left gets the alarm calibration.
	changed := strings.Replace(threeCameras, "name: near", "name: far", 1)
	changed = strings.Replace(changed, `{name: left, url: "rtsp://127.0.0.1:1/left"}`, `{name: left, url: "rtsp://127.0.0.1:1/left", calibration: alarm.yaml}`, 1)
	multiConfig(t, s.dir, changed, "quiet.yaml", `  grid: {rows: 1, cols: 3}`)
	if err := p.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "every camera's new zones", func() bool {
		return zoneNames("front") == "r0c0,r0c1,r0c2" && zoneNames("left") == "r0c0,r0c1,r0c2" && zoneNames("right") == "far"
	})
	if got := p.Metrics().Reloads.Load(); got != 1 {
		t.Fatalf("reloads %d, want 1 (the broken one does not count)", got)
	}
	if tau := p.cams[1].engine.Calibration().TauE; math.Abs(tau-0.000001) > 1e-12 {
		t.Fatalf("left's tau_e %g after reload, want the alarm calibration's 1e-6", tau)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestSharedModelsAllocateNothing: a second camera's frame (a view over
// the shared sessions, with a frame size of its own) allocates nothing in
// the steady state, alternating with the first camera.
func TestSharedModelsAllocateNothing(t *testing.T) {
	requireORT(t)
	s := newTestSetup(t, "quiet.yaml", testmodels.ConfigZones)
	cfg, err := runconfig.Load(multiConfig(t, s.dir, threeCameras, "quiet.yaml", testmodels.ConfigZones))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(context.Background(), cfg, Options{Sources: []camera.Source{camera.NewMailbox(), camera.NewMailbox(), camera.NewMailbox()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for !p.sink.connected() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	ctx := context.Background()
	f0, f1 := testFrame(testW, testH), testFrame(2*testW, 2*testH)
	p.cams[0].process(ctx, f0)
	p.cams[1].process(ctx, f1)
	allocs := math.Inf(1)
	for range 3 {
		allocs = min(allocs, testing.AllocsPerRun(20, func() {
			f0.Seq++
			f1.Seq++
			f0.Capture, f1.Capture = time.Now(), time.Now()
			p.cams[0].process(ctx, f0)
			p.cams[1].process(ctx, f1)
		}))
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per pair of frames, want 0", allocs)
	}
	if e := p.Metrics().Camera(1).Errors.Load(); e != 0 {
		t.Fatalf("%d frame errors", e)
	}
}

// TestSchedulerRoundRobin: the scheduler serves the cameras with a frame
// in turn and skips those without; batches take up to the batch size of
// them in the same order.
func TestSchedulerRoundRobin(t *testing.T) {
	s := scheduler{ready: make([]bool, 3)}
	if s.next() != -1 {
		t.Fatal("a camera served without a frame")
	}
	var order []int
	for range 6 {
		for i := range s.ready {
			if i != 1 { // camera 1 is dead
				s.ready[i] = true
			}
		}
		for s.next() >= 0 {
			order = append(order, s.next())
			s.take(s.next())
		}
	}
	if got := fmt.Sprint(order); got != "[2 0 2 0 2 0 2 0 2 0 2 0]" {
		t.Fatalf("order %s", got)
	}
	// A camera always ready never starves the others.
	s = scheduler{ready: make([]bool, 3)}
	counts := make([]int, 3)
	for k := range 30 {
		s.ready[0] = true
		if k%3 == 0 {
			s.ready[1], s.ready[2] = true, true
		}
		if i := s.next(); i >= 0 {
			counts[i]++
			s.take(i)
		}
	}
	if counts[1] != 10 || counts[2] != 10 || counts[0] != 10 {
		t.Fatalf("served %v, want 10 each", counts)
	}
	// Batches of 2 of 4 cameras, camera 2 dead: 3 0 | 1 3 | 0 1 ...
	s = scheduler{ready: make([]bool, 4)}
	var batches []string
	for range 4 {
		s.ready[0], s.ready[1], s.ready[3] = true, true, true
		for s.next() >= 0 {
			batches = append(batches, fmt.Sprint(s.takeBatch(nil, 2)))
		}
	}
	if got := strings.Join(batches, " "); got != "[1 3] [0] [1 3] [0] [1 3] [0] [1 3] [0]" {
		t.Fatalf("batches %s", got)
	}
}
