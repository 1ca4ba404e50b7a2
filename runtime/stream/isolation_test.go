package stream

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// TestDeadCameraRestartedInProcess: three cameras with open critical
// episodes; camera 2's source fails hard (an error, not the end of a
// sequence). Before this change the error ended Run (the unit restarted,
// every episode ended and re-opened). Now: Health stays OK throughout
// (the unit is not restarted) while camera 2 is reported degraded (its
// check, Cameras, didoedge_camera_degraded) and raises its camera fault;
// after pipeline.camera_restart (2 s) without a frame its source is
// reopened in the process (Options.OpenSource), its frames return and the
// fault ends; cameras 1 and 3 keep their episodes (same ids, no event)
// and their frame rate within 10 %.
func TestDeadCameraRestartedInProcess(t *testing.T) {
	requireORT(t)
	s := newTestSetup(t, "quiet.yaml", testmodels.ConfigZones)
	path := multiConfig(t, s.dir, allAlarm, "quiet.yaml", testmodels.ConfigZones)
	data, _ := os.ReadFile(path)
	text := strings.Replace(string(data), "camera_stall: 0s", "camera_stall: 1s", 1) + "pipeline: {camera_restart: 2s}\n"
	os.WriteFile(path, []byte(text), 0o644)
	cfg, err := runconfig.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var srcs []*synthSource
	newSrc := func() *synthSource {
		src := newSynthSource(testW, testH, 20)
		go src.run(ctx, 0)
		mu.Lock()
		srcs = append(srcs, src)
		mu.Unlock()
		return src
	}
	sources := []camera.Source{newSrc(), newSrc(), newSrc()}
	var log queuedLog
	reopened := 0
	p, err := New(ctx, cfg, Options{Sources: sources, OnEvent: log.add, OpenSource: func(i int, name string) (camera.Source, error) {
		mu.Lock()
		reopened++
		mu.Unlock()
		if i != 1 || name != "left" {
			t.Errorf("OpenSource(%d, %q): only left (1) died", i, name)
		}
		return newSrc(), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitFor(t, 30*time.Second, "two critical episodes on every camera", func() bool {
		c := log.count(alerts.EventNew)
		return c["front"] == 2 && c["left"] == 2 && c["right"] == 2
	})
	time.Sleep(500 * time.Millisecond)
	episodes := func(cam string) string {
		var ids []string
		for _, z := range p.CameraZoneStatus(cam) {
			ids = append(ids, z.Episode)
		}
		return strings.Join(ids, ",")
	}
	before := map[string]string{"front": episodes("front"), "right": episodes("right")}
	rates := func(d time.Duration, during func()) [3]float64 {
		var n0 [3]uint64
		for i := range 3 {
			n0[i] = p.Metrics().Camera(i).Frames.Load()
		}
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if during != nil {
				during()
			}
		}
		var r [3]float64
		for i := range 3 {
			r[i] = float64(p.Metrics().Camera(i).Frames.Load()-n0[i]) / d.Seconds()
		}
		return r
	}
	healthy := rates(3*time.Second, nil)
	events := len(log.snapshot())

	srcs[1].Close(errors.New("camera unplugged"))
	killed := time.Now()
	sawDegraded := false
	during := rates(4*time.Second, func() {
		h := p.Health()
		if !h.OK {
			t.Errorf("Health failed with one dead camera (the unit would restart): %+v", h.Checks)
		}
		if h.Status == "degraded" && len(h.Cameras) == 3 && h.Cameras[1].State == "degraded" && h.Cameras[0].State == "ok" && h.Cameras[2].State == "ok" {
			sawDegraded = true
		}
	})
	if !sawDegraded {
		t.Error("camera left was never reported degraded while dead")
	}
	for _, i := range []int{0, 2} {
		if d := during[i]/healthy[i] - 1; d < -0.1 || d > 0.1 {
			t.Errorf("camera %d: %.2f fps with left dead, %.2f before (%+.1f%%), want within 10%%", i, during[i], healthy[i], 100*d)
		}
	}
	t.Logf("fps before %.2f %.2f %.2f; with left dead and restarted %.2f %.2f %.2f", healthy[0], healthy[1], healthy[2], during[0], during[1], during[2])
	waitFor(t, 10*time.Second, "left's frames after its restart", func() bool {
		h := p.Health()
		return h.Status == "ok" && h.Cameras[1].Restarts >= 1 && h.Cameras[1].LastFrameAgeMS < 500
	})
	mu.Lock()
	if reopened < 1 {
		t.Errorf("OpenSource called %d times", reopened)
	}
	mu.Unlock()
	t.Logf("left back %v after the kill", time.Since(killed).Round(10*time.Millisecond))
	var fault []alerts.EventType
	for _, ev := range log.snapshot()[events:] {
		if ev.Camera != "left" || ev.Kind != alerts.KindCameraFault {
			t.Errorf("event %+v: only left's camera fault may come", ev)
			continue
		}
		fault = append(fault, ev.Type)
	}
	if len(fault) != 2 || fault[0] != alerts.EventNew || fault[1] != alerts.EventEnd {
		t.Errorf("left's camera fault events %v, want new then end", fault)
	}
	for cam, ids := range before {
		if got := episodes(cam); got != ids || strings.Contains(","+got+",", ",,") {
			t.Errorf("%s's episodes %q, before %q: the healthy cameras keep theirs", cam, got, ids)
		}
	}
	var m strings.Builder
	p.Metrics().WriteTo(&m)
	for _, want := range []string{`didoedge_camera_restarts_total{camera="left"} 1`, `didoedge_camera_restarts_total{camera="front"} 0`, `didoedge_camera_degraded{camera="left"} 0`} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
