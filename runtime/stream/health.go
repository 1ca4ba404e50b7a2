package stream

import (
	"fmt"
	"time"
)

// HealthCheck is one condition of Health.
type HealthCheck struct {
	Name string `json:"name"`
	// Camera names the camera of a per-camera check ("" for the others).
	Camera string `json:"camera,omitempty"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Health says whether the pipeline works: OK when every check passes.
type Health struct {
	OK     bool          `json:"ok"`
	Checks []HealthCheck `json:"checks"`
}

// Health reports whether the pipeline works, not only the process: it is
// running (Run was called and has not returned), its models are loaded,
// every camera had a frame processed within alerts.events.camera_stall
// (counted from the start of Run until its first frame; one "frames"
// check per camera, so a camera away past its stall limit fails the
// pipeline), and the outbox can store events (not in its write-fault
// state, e.g. disk full). /healthz serves it, and the systemd health timer
// restarts the service when it fails.
func (p *Pipeline) Health() Health {
	now := time.Now()
	var h Health
	add := func(name, cam string, ok bool, detail string) {
		h.Checks = append(h.Checks, HealthCheck{Name: name, Camera: cam, OK: ok, Detail: detail})
	}
	running := p.running.Load()
	add("running", "", running, map[bool]string{true: "frame loop running", false: "frame loop not running"}[running])
	loaded := p.modelsLoaded()
	add("models", "", loaded, map[bool]string{true: "depth and AuxUE sessions loaded", false: "models not loaded"}[loaded])
	for _, c := range p.cams {
		ok, detail := c.framesHealth(now)
		add("frames", c.spec.Name, ok, detail)
	}
	if p.sink != nil {
		err := p.sink.svc.Publisher().OutboxWritable()
		d := "writable"
		if err != nil {
			d = "cannot store events: " + err.Error()
		}
		add("outbox", "", err == nil, d)
	}
	h.OK = true
	for _, c := range h.Checks {
		h.OK = h.OK && c.OK
	}
	return h
}

// framesHealth is the camera's frames check: a frame processed within
// alerts.events.camera_stall while the pipeline runs.
func (c *cameraPipe) framesHealth(now time.Time) (bool, string) {
	p := c.p
	stall := time.Duration(c.stallNS.Load())
	if stall <= 0 {
		stall = 2 * time.Second
	}
	last, start := c.metrics.lastFrame.Load(), p.runStart.Load()
	age := now.Sub(time.Unix(0, max(last, start)))
	ok := p.running.Load() && age <= stall
	if last < start {
		return ok, fmt.Sprintf("no frame yet, %s since the start (limit %s, alerts.events.camera_stall)", age.Round(time.Millisecond), stall)
	}
	return ok, fmt.Sprintf("last frame %s ago (limit %s, alerts.events.camera_stall)", age.Round(time.Millisecond), stall)
}
