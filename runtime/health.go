package runtime

import (
	"fmt"
	"time"
)

// HealthCheck is one condition of Health.
type HealthCheck struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Health says whether the pipeline works: OK when every check passes.
type Health struct {
	OK     bool          `json:"ok"`
	Checks []HealthCheck `json:"checks"`
}

// Health reports whether the pipeline works, not only the process: it is
// running (Run was called and has not returned), its models are loaded, a
// frame was processed within alerts.events.camera_stall (counted from the
// start of Run until the first frame), and the outbox can store events
// (not in its write-fault state, e.g. disk full). /healthz serves it, and
// the systemd health timer restarts the service when it fails.
func (p *Pipeline) Health() Health {
	now := time.Now()
	var h Health
	add := func(name string, ok bool, detail string) {
		h.Checks = append(h.Checks, HealthCheck{Name: name, OK: ok, Detail: detail})
	}
	running := p.running.Load()
	add("running", running, map[bool]string{true: "frame loop running", false: "frame loop not running"}[running])
	loaded := p.modelsLoaded()
	add("models", loaded, map[bool]string{true: "depth and AuxUE sessions loaded", false: "models not loaded"}[loaded])
	stall := p.cfg.AlertsConfig.Events.CameraStall
	if stall <= 0 {
		stall = 2 * time.Second
	}
	since := time.Unix(0, max(p.metrics.lastFrame.Load(), p.runStart.Load()))
	age := now.Sub(since)
	framesOK := running && age <= stall
	detail := fmt.Sprintf("last frame %s ago (limit %s, alerts.events.camera_stall)", age.Round(time.Millisecond), stall)
	if p.metrics.lastFrame.Load() < p.runStart.Load() {
		detail = fmt.Sprintf("no frame yet, %s since the start (limit %s, alerts.events.camera_stall)", age.Round(time.Millisecond), stall)
	}
	add("frames", framesOK, detail)
	if p.sink != nil {
		err := p.sink.svc.Publisher().OutboxWritable()
		d := "writable"
		if err != nil {
			d = "cannot store events: " + err.Error()
		}
		add("outbox", err == nil, d)
	}
	h.OK = true
	for _, c := range h.Checks {
		h.OK = h.OK && c.OK
	}
	return h
}
