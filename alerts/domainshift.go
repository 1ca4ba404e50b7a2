package alerts

import (
	"fmt"
	"strconv"
	"time"
)

// KindDomainShift marks a camera-level episode during which the camera's
// frames are unlike the frames the models were trained on (the domain
// monitor's smoothed distance above its threshold, package runtime/domain).
// The zones' uncertainty is then itself untrustworthy: DIDO's K/S ranks
// pixels within a frame and may stay low on a foreign camera, or raise
// every zone at once.
const KindDomainShift EventKind = "domain_shift"

// ReasonDomainDistance is the reason of domain_shift events.
const ReasonDomainDistance = "domain_distance"

// DomainPolicy says what zone episodes do while the camera is shifted.
type DomainPolicy string

// Domain policies.
const (
	// DomainFlag (the default): zone episodes are decided as always; those
	// opened while the camera is shifted carry domain_shift: true.
	DomainFlag DomainPolicy = "flag"
	// DomainSuppress: while the camera is shifted no zone episode opens
	// (the zones' targets are held at ok, open episodes end through their
	// exit inertia): the domain_shift episode is the camera's alert.
	DomainSuppress DomainPolicy = "suppress"
)

// Validate checks the policy ("" is DomainFlag); path names the key.
func (p DomainPolicy) Validate(path string) error {
	switch p {
	case "", DomainFlag, DomainSuppress:
		return nil
	}
	return fmt.Errorf("%s: %q, want flag or suppress", path, string(p))
}

// DomainReading is the domain monitor's state after a frame, as the
// engine needs it.
type DomainReading struct {
	// Distance is the frame's distance to the training domain, Smoothed
	// its mean over Window, Threshold what Smoothed is compared with.
	Distance, Smoothed, Threshold float64
	Window                        time.Duration
	// Shifted: the monitor holds a shift (Smoothed rose above Threshold
	// and has not fallen below its release level since).
	Shifted bool
}

// DomainMetrics is the JSON form of a DomainReading in domain_shift events.
type DomainMetrics struct {
	Distance  float64 `json:"distance"`
	Smoothed  float64 `json:"smoothed"`
	Threshold float64 `json:"threshold"`
	WindowS   float64 `json:"window_s"`
}

// domainShiftState is the engine's open domain_shift episode.
type domainShiftState struct {
	open       bool
	id         string
	start      int64
	lastUpdate time.Time
	last       DomainReading
}

// ObserveDomain records the domain monitor's reading of frame f. Call it
// before Observe of the same frame, so that zone episodes that frame opens
// know the camera's state. A shift opens one domain_shift episode (a new
// event at warn), continues it with an update every UpdateInterval, and
// ends it when the reading is no longer shifted. It allocates only when
// it delivers an event.
func (e *Engine) ObserveDomain(f Frame, r DomainReading) error {
	e.version++
	tms := f.Capture.UnixMilli()
	d := &e.dshift
	d.last = r
	var t EventType
	switch {
	case r.Shifted && !d.open:
		e.counter++
		*d = domainShiftState{open: true, start: tms, lastUpdate: f.Capture, last: r,
			id: e.cfg.Camera + "-domain-" + strconv.FormatInt(tms, 10) + "-" + strconv.FormatUint(e.counter, 10)}
		t = EventNew
	case !r.Shifted && d.open:
		t = EventEnd
	case d.open && e.cfg.UpdateInterval > 0 && f.Capture.Sub(d.lastUpdate) >= e.cfg.UpdateInterval:
		d.lastUpdate = f.Capture
		t = EventUpdate
	default:
		return nil
	}
	ev := e.domainEvent(t, tms, f.Seq)
	if t == EventEnd {
		d.open = false
	}
	return e.sink.Event(&ev)
}

// DomainShifted reports whether a domain_shift episode is open.
func (e *Engine) DomainShifted() bool { return e.dshift.open }

// domainEvent is an event of the open domain_shift episode.
func (e *Engine) domainEvent(t EventType, tms int64, frame uint64) Event {
	d := &e.dshift
	level, prev := LevelWarn, LevelOK
	switch t {
	case EventUpdate:
		prev = LevelWarn
	case EventEnd:
		level, prev = LevelOK, LevelWarn
	}
	reasons := []string{ReasonDomainDistance}
	if t == EventEnd {
		reasons = []string{}
	}
	r := d.last
	return Event{Schema: EventSchemaID, ID: d.id, Type: t, Kind: KindDomainShift,
		Vehicle: e.cfg.Vehicle, Camera: e.cfg.Camera, Level: level, Previous: prev, Reasons: reasons,
		StartMS: d.start, TimeMS: tms, FrameSeq: frame,
		Domain: &DomainMetrics{Distance: r.Distance, Smoothed: r.Smoothed, Threshold: r.Threshold, WindowS: r.Window.Seconds()}}
}

// endDomainShift appends the end of an open domain_shift episode to evs
// and closes it (reload, shutdown).
func (e *Engine) endDomainShift(evs []Event, tms int64, frame uint64) []Event {
	if !e.dshift.open {
		return evs
	}
	evs = append(evs, e.domainEvent(EventEnd, tms, frame))
	e.dshift.open = false
	return evs
}
