package alerts

import (
	"errors"
	"fmt"
	"reflect"
	"time"
)

// PreparedReload is one engine's reload, validated and built but not
// applied: the new assessor, calibration and timing, and the end events
// (with the zones' closing states) of every episode open now, which the
// swap must deliver. Preparing changes nothing; ApplyReloads applies
// several prepared reloads at once, or none.
type PreparedReload struct {
	e       *Engine
	version uint64 // the engine's version when prepared
	cfg     EngineConfig
	a       *Assessor
	cal     Calibration
	now     time.Time
	ends    []Event
	// endStates are the old zones' states after their episodes ended
	// (level ok), delivered after the end events so that a zone the new
	// configuration drops keeps no raised retained state.
	endStates []State
	// remove: the camera leaves the configuration (PrepareRemove).
	remove bool
}

// Removes reports whether the prepared change removes the camera
// (PrepareRemove) rather than reloading it.
func (r *PreparedReload) Removes() bool { return r.remove }

// PrepareReload validates spec and builds the engine state it asks for:
// zones, calibration and timing (identity and stats settings are kept),
// and the end events of every open episode, zone risks and a camera fault
// alike, because the new zones start at ok with fresh fusion state. It
// changes nothing; a spec that does not build is an error.
func (e *Engine) PrepareReload(spec EngineSpec, now time.Time) (*PreparedReload, error) {
	c := spec.Config
	if err := c.Timing.Validate("events"); err != nil {
		return nil, fmt.Errorf("reload camera %q: %w", e.cfg.Camera, err)
	}
	if err := c.DomainPolicy.Validate("domain.policy"); err != nil {
		return nil, fmt.Errorf("reload camera %q: %w", e.cfg.Camera, err)
	}
	a, err := NewAssessor(spec.Zones, spec.Ignore, spec.Calibration)
	if err != nil {
		return nil, fmt.Errorf("reload camera %q: %w", e.cfg.Camera, err)
	}
	cfg := e.cfg
	cfg.Timing, cfg.UpdateInterval, cfg.StallAfter, cfg.DomainPolicy = c.Timing, c.UpdateInterval, c.StallAfter, c.DomainPolicy
	r := &PreparedReload{e: e, version: e.version, cfg: cfg, a: a, cal: spec.Calibration, now: now}
	e.prepareEnds(r, now)
	return r, nil
}

// PrepareRemove prepares the removal of the engine's camera from a
// running configuration: the end events of every open episode (zone
// risks, a camera or model fault), as PrepareReload, queued by
// ApplyReloads in the same all-or-nothing batch as the other cameras'
// end events. Applied, it delivers them and the zones' closing states,
// then tells the sinks that implement CameraRemovedSink that the camera
// is gone (the MQTT service clears its retained states and Home Assistant
// discovery configs); the engine is retired and must not be used again.
// It changes nothing until applied.
func (e *Engine) PrepareRemove(now time.Time) *PreparedReload {
	r := &PreparedReload{e: e, version: e.version, cfg: e.cfg, now: now, remove: true}
	e.prepareEnds(r, now)
	return r
}

// prepareEnds fills r with the end events of every episode open now and
// the zones' states after them; the engine is not touched.
func (e *Engine) prepareEnds(r *PreparedReload, now time.Time) {
	tms := now.UnixMilli()
	for i := range e.zones {
		z := e.zones[i] // a copy: the engine is not touched
		open, prev := z.track.end(now)
		if !open {
			continue
		}
		r.ends = append(r.ends, Event{Schema: EventSchemaID, ID: z.episode, Type: EventEnd, Kind: KindZone,
			Vehicle: e.cfg.Vehicle, Camera: e.cfg.Camera, Zone: e.names[i], Level: LevelOK, Previous: prev,
			Reasons: []string{}, StartMS: z.startMS, TimeMS: tms, FrameSeq: e.lastSeq, DomainShift: z.domainShift})
		z.episode = ""
		r.endStates = append(r.endStates, e.stateOf(&z, e.names[i], now))
	}
	if e.stalled {
		r.ends = append(r.ends, e.faultEvent(EventEnd, LevelOK, LevelCritical, tms, e.lastSeq))
	}
	if e.mfault.open {
		r.ends = append(r.ends, e.modelFaultEvent(EventEnd, LevelOK, LevelCritical, tms, e.lastSeq))
	}
	if e.dshift.open {
		r.ends = append(r.ends, e.domainEvent(EventEnd, tms, e.lastSeq))
	}
}

// Engine is the engine the reload is for.
func (r *PreparedReload) Engine() *Engine { return r.e }

// EndEvents are the end events the reload delivers, in order; their Seq is
// set once they were queued.
func (r *PreparedReload) EndEvents() []*Event {
	out := make([]*Event, len(r.ends))
	for i := range r.ends {
		out[i] = &r.ends[i]
	}
	return out
}

// durableSink is the engine's first sink that queues batches all or
// nothing (nil when none).
func (e *Engine) durableSink() BatchSink {
	ss, _ := e.sink.(Sinks)
	for _, s := range ss {
		if b, ok := s.(BatchSink); ok {
			return b
		}
	}
	return nil
}

// ErrNotApplied wraps the errors of ApplyReloads that left every engine
// unchanged.
var ErrNotApplied = errors.New("reload not applied")

// ApplyReloads applies prepared reloads all at once or not at all. First
// the end events of every reload are queued in one all-or-nothing batch
// through the engines' durable sink (the MQTT outbox, a BatchSink in each
// engine's Sinks): when it cannot take them (outbox full, disk full), the
// error is returned and no engine has changed, every episode is still
// open. Only then every engine swaps in its new state: the end events go
// to its other sinks (which see their seq), the old zones' closing
// states, then the new zones and their states (as NewEngine). Errors of
// that second phase are returned joined, but every engine was reloaded.
// Engines that share no durable sink cannot be reloaded atomically
// together: that is an error, before anything changes. A reload prepared
// for an engine that changed since (a frame, a tick, another reload) is
// refused too.
func ApplyReloads(reloads []*PreparedReload) error {
	var durable BatchSink
	var batch []*Event
	for _, r := range reloads {
		if r.e.version != r.version {
			return fmt.Errorf("%w: camera %q: the engine changed after the reload was prepared; prepare it again", ErrNotApplied, r.e.cfg.Camera)
		}
		if r.e.retired {
			return fmt.Errorf("%w: camera %q was removed", ErrNotApplied, r.e.cfg.Camera)
		}
		d := r.e.durableSink()
		if d == nil {
			continue
		}
		if durable != nil && !sameSink(durable, d) {
			return fmt.Errorf("%w: cameras %q and %q queue to different durable sinks; reload them separately", ErrNotApplied, reloads[0].e.cfg.Camera, r.e.cfg.Camera)
		}
		durable = d
		batch = append(batch, r.EndEvents()...)
	}
	if len(batch) > 0 {
		if err := durable.EventBatch(batch); err != nil {
			return fmt.Errorf("%w: %w", ErrNotApplied, &SinkError{Sink: SinkName(durable), Op: fmt.Sprintf("%d end events of the reload", len(batch)), Err: err})
		}
	}
	var errs []error
	for _, r := range reloads {
		errs = append(errs, r.commit(durable))
	}
	return errors.Join(errs...)
}

// commit swaps the prepared state in. The end events were queued by
// queued already (nil: by none), so it gets only the closing states.
func (r *PreparedReload) commit(queued BatchSink) error {
	e := r.e
	e.version++
	var errs []error
	ss, ok := e.sink.(Sinks)
	if !ok {
		ss = Sinks{e.sink}
	}
	for i := range r.ends {
		ev := &r.ends[i]
		for _, s := range ss {
			if queued != nil && sameSink(s, queued) {
				continue
			}
			if err := s.Event(ev); err != nil {
				errs = append(errs, &SinkError{Sink: SinkName(s), Op: string(ev.Type) + " event " + ev.ID, Err: err})
			}
		}
	}
	for i := range r.endStates {
		if err := e.sink.State(&r.endStates[i]); err != nil {
			errs = append(errs, err)
		}
	}
	e.stalled = false
	e.mfault.open = false
	e.dshift.open = false
	if r.remove {
		// Retired: every zone ended above; the sinks forget the camera.
		e.retired = true
		if cs, ok := e.sink.(CameraRemovedSink); ok {
			errs = append(errs, cs.CameraRemoved(e.cfg.Vehicle, e.cfg.Camera, e.names))
		}
		return errors.Join(errs...)
	}
	e.cfg = r.cfg
	e.install(r.a, r.cal)
	e.lastFrameAt = r.now // the new configuration's stall clock starts now
	return errors.Join(append(errs, e.announce(r.now))...)
}

// sameSink reports whether two sinks are the same value (false for sinks
// of types that cannot be compared, such as SinkFuncs).
func sameSink(a, b Sink) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta != nil && ta.Comparable() && a == b
}

// Reload swaps in the zones, calibration and timing of spec (identity and
// stats settings are kept): PrepareReload, then ApplyReloads of this one
// engine. A spec that does not build, or end events its durable sink
// cannot queue, are refused and the engine unchanged. Otherwise every
// open episode is ended (end events, states ok), then the sinks learn the
// new zones and their states. The episode counter continues, so ids stay
// unique.
func (e *Engine) Reload(spec EngineSpec, now time.Time) error {
	r, err := e.PrepareReload(spec, now)
	if err != nil {
		return err
	}
	return ApplyReloads([]*PreparedReload{r})
}
