package stream

import (
	"fmt"
	"strconv"
	"time"
)

// HealthCheck is one condition of Health.
type HealthCheck struct {
	Name string `json:"name"`
	// Camera names the camera of a per-camera check ("" for the others).
	Camera string `json:"camera,omitempty"`
	OK     bool   `json:"ok"`
	// Critical checks decide Health.OK (the unit is restarted when one
	// fails); the others report a degraded state that a restart of the
	// unit would not mend (one dead camera, a full disk).
	Critical bool   `json:"critical"`
	Detail   string `json:"detail"`
}

// CameraHealth is one camera's state in Health.
type CameraHealth struct {
	Name string `json:"name"`
	// State is "ok" or "degraded" (no frame within its stall limit, or its
	// source failed; it is being restarted inside the process).
	State string `json:"state"`
	// Ready: a frame assessed within the last 2 seconds (/readyz).
	Ready bool `json:"ready"`
	// LastFrameAgeMS is the age of its last frame through the models,
	// assessed or a model fault (-1: none yet).
	LastFrameAgeMS int64 `json:"last_frame_age_ms"`
	// Restarts counts in-process restarts of its source.
	Restarts uint64 `json:"restarts"`
	Detail   string `json:"detail"`
}

// Health says whether the pipeline works (OK: every critical check
// passes) and what is degraded.
type Health struct {
	OK bool `json:"ok"`
	// Status is "ok", "degraded" (OK, but a camera or the outbox is down)
	// or "failed" (not OK).
	Status string `json:"status"`
	// Degraded names what is degraded: "camera NAME", "outbox".
	Degraded []string       `json:"degraded,omitempty"`
	Checks   []HealthCheck  `json:"checks"`
	Cameras  []CameraHealth `json:"cameras"`
}

// Health reports whether the pipeline as a whole works, which is what the
// systemd health timer restarts the unit on (/healthz, docs/deploy.md): it
// is running (Run was called and has not returned), its models are loaded,
// its scheduler goroutine goes round (not stuck in a model run or a
// sink), and at least one camera had a frame processed within its stall
// limit (alerts.events.camera_stall, counted from the start of Run until
// its first frame). A single dead camera is not a failure of the
// pipeline: it is reported degraded (its "camera" check, Cameras,
// didoedge_camera_degraded, its camera_fault event) and its source is
// restarted inside the process (pipeline.camera_restart) while the other
// cameras go on; a restart of the unit would only end and re-open every
// healthy camera's episodes. An outbox that cannot store events (disk
// full) is degraded too: a restart cannot free the disk.
func (p *Pipeline) Health() Health {
	now := time.Now()
	var h Health
	add := func(name, cam string, ok, critical bool, detail string) {
		h.Checks = append(h.Checks, HealthCheck{Name: name, Camera: cam, OK: ok, Critical: critical, Detail: detail})
	}
	running := p.running.Load()
	add("running", "", running, true, map[bool]string{true: "frame loop running", false: "frame loop not running"}[running])
	loaded := p.modelsLoaded()
	add("models", "", loaded, true, map[bool]string{true: "depth and AuxUE sessions loaded", false: "models not loaded"}[loaded])
	limit := p.stallLimit()
	if running {
		age := now.Sub(time.Unix(0, p.loopNS.Load()))
		add("loop", "", age <= limit, true, fmt.Sprintf("scheduler went round %s ago (limit %s, alerts.events.camera_stall)", age.Round(time.Millisecond), limit))
	} else {
		add("loop", "", false, true, "scheduler not running")
	}
	live, newest := 0, time.Duration(-1)
	cams := p.cameras().list
	for _, c := range cams {
		ok, detail := c.framesHealth(now)
		degraded := !ok || c.srcErr.Load()
		if c.srcErr.Load() {
			detail = "source failed; restarting it in the process (pipeline.camera_restart); " + detail
		}
		// A model fault degrades the camera but not the pipeline: its frames
		// arrive (they count as live below), the models cannot assess them,
		// and a restart of the unit would not mend the model.
		alive := !degraded
		if mok, mdetail := c.modelHealth(); !mok { // modelfault.go
			degraded, detail = true, mdetail+"; "+detail
		}
		// A lasting domain shift degrades the camera (its frames arrive and
		// are assessed, but by models that never saw their like); a shift
		// is reported in its own check before that.
		dok, ddetail := c.domainHealth() // domain.go
		if !dok {
			degraded, detail = true, ddetail+"; "+detail
		}
		ch := CameraHealth{Name: c.name, State: "ok", Ready: p.ready.Load() && c.ready(), LastFrameAgeMS: -1,
			Restarts: c.restarts.Load(), Detail: detail}
		if last := max(c.metrics.lastFrame.Load(), c.metrics.lastFault.Load()); last != 0 {
			age := now.Sub(time.Unix(0, last))
			ch.LastFrameAgeMS = age.Milliseconds()
			if newest < 0 || age < newest {
				newest = age
			}
		}
		if degraded {
			ch.State = "degraded"
			h.Degraded = append(h.Degraded, "camera "+c.name)
		}
		if alive {
			live++
		}
		h.Cameras = append(h.Cameras, ch)
		add("camera", c.name, !degraded, false, detail)
		if c.domainStatus().On {
			add("domain", c.name, dok, false, ddetail)
		}
	}
	framesDetail := strconv.Itoa(live) + " of " + strconv.Itoa(len(cams)) + " cameras with frames within their stall limit (alerts.events.camera_stall)"
	if live == 0 && newest >= 0 {
		framesDetail = fmt.Sprintf("no camera processed a frame for %s (limit %s, alerts.events.camera_stall)", newest.Round(time.Millisecond), limit)
	} else if live == 0 {
		framesDetail = fmt.Sprintf("no camera processed a frame yet (limit %s, alerts.events.camera_stall)", limit)
	}
	add("frames", "", live > 0, true, framesDetail)
	if p.sink != nil {
		err := p.sink.svc.Publisher().OutboxWritable()
		d := "writable"
		if err != nil {
			d = "cannot store events (new events are refused and counted; a restart would not help): " + err.Error()
			h.Degraded = append(h.Degraded, "outbox")
		}
		add("outbox", "", err == nil, false, d)
	}
	h.OK = true
	for _, c := range h.Checks {
		if c.Critical {
			h.OK = h.OK && c.OK
		}
	}
	switch {
	case !h.OK:
		h.Status = "failed"
	case len(h.Degraded) > 0:
		h.Status = "degraded"
	default:
		h.Status = "ok"
	}
	return h
}

// stallLimit is the largest camera stall limit: the pipeline is stuck
// when no camera had a frame, or the scheduler did not go round, for it.
func (p *Pipeline) stallLimit() time.Duration {
	limit := time.Duration(0)
	for _, c := range p.cameras().list {
		limit = max(limit, c.stallLimit())
	}
	return limit
}

// stallLimit is the camera's alerts.events.camera_stall (2s when off).
func (c *cameraPipe) stallLimit() time.Duration {
	stall := time.Duration(c.stallNS.Load())
	if stall <= 0 {
		stall = 2 * time.Second
	}
	return stall
}

// degraded reports whether the camera is degraded: no frame within its
// stall limit, its source failed, or a domain shift outlasted
// domain.persistence.
func (c *cameraPipe) degraded(now time.Time) bool {
	ok, _ := c.framesHealth(now)
	dok, _ := c.domainHealth()
	return !ok || c.srcErr.Load() || !dok
}

// framesHealth is the camera's frames check: a frame processed within
// alerts.events.camera_stall while the pipeline runs.
func (c *cameraPipe) framesHealth(now time.Time) (bool, string) {
	p := c.p
	stall := c.stallLimit()
	// A frame the models could not assess still shows the camera alive
	// (a model fault is reported on its own: modelHealth).
	last, start := max(c.metrics.lastFrame.Load(), c.metrics.lastFault.Load()), max(p.runStart.Load(), c.addedNS.Load())
	age := now.Sub(time.Unix(0, max(last, start)))
	ok := p.running.Load() && age <= stall
	if last < start {
		return ok, fmt.Sprintf("no frame yet, %s since the start (limit %s, alerts.events.camera_stall)", age.Round(time.Millisecond), stall)
	}
	return ok, fmt.Sprintf("last frame %s ago (limit %s, alerts.events.camera_stall)", age.Round(time.Millisecond), stall)
}
