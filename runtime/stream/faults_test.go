package stream

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/testmodels"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera/rtspserver"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// gradient is an RTSP test source: a moving gradient at the test models'
// size.
type gradient struct{ shift int }

func (g gradient) Size() (int, int) { return testW, testH }

func (g gradient) Render(index int, rgb []uint8) error {
	for i := range testW * testH {
		rgb[3*i], rgb[3*i+1], rgb[3*i+2] = uint8(i+index+g.shift), uint8(i/testW*4), 128
	}
	return nil
}

// startRTSP serves one camera at rtsp://addr/cam (M-JPEG, 15 fps); addr
// "" picks a free port.
func startRTSP(t *testing.T, addr string, shift int) *rtspserver.Server {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	srv, err := rtspserver.New(rtspserver.Config{Addr: addr, Logger: slog.New(slog.DiscardHandler),
		Generated: map[string]rtspserver.Generated{"cam": {Source: gradient{shift}, FPS: 15}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	return srv
}

// TestCameraFaultOverRTSP: three real RTSP cameras in one runtime; one is
// killed (its server closes). The other two keep their frame rate within
// 10% and raise no event; the dead one raises its camera fault within its
// stall limit (alerts.events.camera_stall, 2 s) and ends it when its
// source returns on the same address.
func TestCameraFaultOverRTSP(t *testing.T) {
	requireORT(t)
	var srvs []*rtspserver.Server
	for i := range 3 {
		srvs = append(srvs, startRTSP(t, "", 40*i))
	}
	defer func() {
		for _, s := range srvs {
			s.Close()
		}
	}()
	var cams strings.Builder
	for i, name := range []string{"front", "left", "right"} {
		fmt.Fprintf(&cams, "  - {name: %s, url: \"rtsp://%s/cam\", stall_timeout: 1s, backoff_min: 100ms, backoff_max: 500ms}\n", name, srvs[i].Addr())
	}
	s := newTestSetup(t, "quiet.yaml", testmodels.ConfigZones)
	cfg, err := runconfig.Load(multiConfig(t, s.dir, cams.String(), "quiet.yaml", testmodels.ConfigZones))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []alerts.Event
	var eventAt []time.Time
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := New(ctx, cfg, Options{OnEvent: func(ev *alerts.Event) {
		mu.Lock()
		events, eventAt = append(events, *ev), append(eventAt, time.Now())
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitFor(t, 30*time.Second, "frames from every camera", func() bool { return p.Ready() })
	time.Sleep(time.Second)
	rates := func(d time.Duration) [3]float64 {
		var before [3]uint64
		for i := range 3 {
			before[i] = p.Metrics().Camera(i).Frames.Load()
		}
		time.Sleep(d)
		var r [3]float64
		for i := range 3 {
			r[i] = float64(p.Metrics().Camera(i).Frames.Load()-before[i]) / d.Seconds()
		}
		return r
	}
	healthy := rates(4 * time.Second)
	for i, r := range healthy {
		if r < 10 {
			t.Fatalf("camera %d at %.1f fps before the fault, want about 15", i, r)
		}
	}

	killed := time.Now()
	addr := srvs[1].Addr()
	srvs[1].Close()
	during := rates(4 * time.Second)
	for _, i := range []int{0, 2} {
		if d := during[i]/healthy[i] - 1; d < -0.1 || d > 0.1 {
			t.Errorf("camera %d: %.2f fps with left dead, %.2f before (%+.1f%%), want within 10%%", i, during[i], healthy[i], 100*d)
		}
	}
	t.Logf("fps before the kill %.2f %.2f %.2f; with left dead %.2f %.2f %.2f", healthy[0], healthy[1], healthy[2], during[0], during[1], during[2])
	mu.Lock()
	var fault *alerts.Event
	var faultAt time.Time
	for i, ev := range events {
		if ev.Camera != "left" || ev.Kind != alerts.KindCameraFault {
			t.Errorf("event of a healthy camera (or a zone): %+v", ev)
			continue
		}
		if ev.Type == alerts.EventNew && fault == nil {
			fault, faultAt = &events[i], eventAt[i]
		}
	}
	mu.Unlock()
	if fault == nil {
		t.Fatal("no camera fault for the killed camera within 4 s")
	}
	// No frame for camera_stall (2 s), seen at the next tick (250 ms); the
	// last frame came up to one frame period (67 ms) before the kill.
	if el := faultAt.Sub(killed); el < 2*time.Second-100*time.Millisecond || el > 2*time.Second+400*time.Millisecond {
		t.Errorf("camera fault %v after the kill, want within camera_stall (2s) plus one tick", el)
	}
	t.Logf("camera fault %v after the kill", faultAt.Sub(killed).Round(time.Millisecond))
	if h := p.CameraReady(); h["left"] || !h["front"] || !h["right"] {
		t.Errorf("readiness with left dead: %v", h)
	}
	if h := p.Health(); !h.OK || h.Status != "degraded" || len(h.Degraded) != 1 || h.Degraded[0] != "camera left" {
		t.Errorf("health with left dead: OK %v status %q degraded %v, want OK (no unit restart), degraded: camera left", h.OK, h.Status, h.Degraded)
	}

	srvs[1] = startRTSP(t, addr, 40) // the source returns on its address
	waitFor(t, 15*time.Second, "left's fault to end", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range events {
			if ev.Camera == "left" && ev.Kind == alerts.KindCameraFault && ev.Type == alerts.EventEnd {
				return true
			}
		}
		return false
	})
	waitFor(t, 5*time.Second, "every camera ready again", func() bool { return p.Ready() && p.Health().Status == "ok" })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
