package stream

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/testmodels"
)

// failing lists the failing critical checks (those that fail Health).
func failing(h Health) []string {
	var out []string
	for _, c := range h.Checks {
		if !c.OK && c.Critical {
			out = append(out, c.Name+": "+c.Detail)
		}
	}
	return out
}

// TestHealthFollowsThePipeline: Health passes while frames are processed;
// when the only camera stalls (the process and its HTTP server live on)
// no camera has frames: the pipeline-wide frames check fails after
// alerts.events.camera_stall (2 s here), the camera is degraded, and both
// pass again when frames return; after Run ends nothing passes.
func TestHealthFollowsThePipeline(t *testing.T) {
	s := newTestSetup(t, "quiet.yaml", testmodels.ConfigZones)
	p, src, stop := startPipeline(t, s, 20, nil)
	waitFor(t, 30*time.Second, "a healthy pipeline with frames", func() bool { return p.Health().OK && p.Metrics().Camera(0).Frames.Load() > 3 })
	if h := p.Health(); len(h.Checks) != 6 || h.Status != "ok" {
		t.Fatalf("checks %+v, want running, models, loop, camera front, frames, outbox", h.Checks)
	}
	src.pause(true)
	paused := time.Now()
	waitFor(t, 10*time.Second, "the frames check to fail", func() bool { return !p.Health().OK })
	// The last frame came up to one frame period (50 ms) before the pause.
	if el := time.Since(paused); el < 2*time.Second-100*time.Millisecond {
		t.Fatalf("unhealthy %v after the pause, before camera_stall (2s)", el)
	}
	if f := failing(p.Health()); len(f) != 1 || !strings.HasPrefix(f[0], "frames: no camera processed a frame for") || !strings.Contains(f[0], "alerts.events.camera_stall") {
		t.Fatalf("failing checks %q, want frames only", f)
	}
	if h := p.Health(); h.Status != "failed" || len(h.Degraded) != 1 || h.Degraded[0] != "camera front" {
		t.Fatalf("status %q degraded %v", h.Status, h.Degraded)
	}
	var m bytes.Buffer
	p.Metrics().WriteTo(&m)
	if !strings.Contains(m.String(), "\ndidoedge_healthy 0\n") || !strings.Contains(m.String(), "\ndidoedge_outbox_write_fault 0\n") {
		t.Fatalf("metrics while unhealthy:\n%s", m.String())
	}
	src.pause(false)
	waitFor(t, 10*time.Second, "health after the frames return", func() bool { return p.Health().OK })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if f := failing(p.Health()); len(f) < 3 {
		t.Fatalf("after Run: failing %q, want running, models, loop and frames", f)
	}
}
