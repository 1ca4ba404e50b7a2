package alerts

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Frame is one frame as the engine sees it.
type Frame struct {
	// Seq is the camera's frame sequence number; gaps count as dropped frames.
	Seq uint64
	// Capture is when the frame was captured: every duration of Timing is
	// measured on it.
	Capture time.Time
	// Camera must be empty or equal the engine's camera.
	Camera string
	// Image is the picture the maps were computed from (optional): event
	// snapshots need it.
	Image *Image
}

// EngineConfig configures an Engine.
type EngineConfig struct {
	Vehicle, Camera string
	// Timing: fusion, inertia, minimum episode and merge window.
	Timing Timing
	// UpdateInterval: while an episode lasts, an update event with fresh
	// metrics at most this often (0: only on level changes).
	UpdateInterval time.Duration
	// StallAfter: no frame for this long raises a camera fault (0: off).
	StallAfter time.Duration
	// DomainPolicy: what zone episodes do while the camera is shifted
	// (flag, the default, or suppress; domainshift.go).
	DomainPolicy DomainPolicy
	// StatsInterval: Tick delivers stats and every zone's state this often
	// (0: never).
	StatsInterval time.Duration
	// Now is the wall clock (latency, stall detection); nil means time.Now.
	Now func() time.Time
}

// EngineSpec is everything an engine is built from; Reload takes a new one.
type EngineSpec struct {
	Config      EngineConfig
	Zones       []Zone
	Ignore      []Zone
	Calibration Calibration
}

// Fused are a zone's risk signals after temporal fusion.
type Fused struct {
	OODFraction, AleatoricFraction float32
	// PessimisticDepth is valid when HasDepth.
	PessimisticDepth float32
	HasDepth         bool
	// ConfidenceFraction is valid when HasConfidence (a frame had a
	// confidence map).
	ConfidenceFraction float32
	HasConfidence      bool
}

// ZoneStatus is a zone's current level, fused signals and episode.
type ZoneStatus struct {
	Name  string
	Level Level
	Fused Fused
	// Episode is the open episode's id ("" when none); Closing tells an
	// episode back at ok that waits out the merge window.
	Episode string
	Closing bool
}

// criteria, in the order of zoneState.crit and zoneState.fused.
const (
	critOOD = iota
	critAleatoric
	critDepth
	critConfidence
	numCriteria
)

var criterionNames = [numCriteria]string{"ood_fraction", "aleatoric_fraction", "pessimistic_depth_m", "confidence_fraction"}

type zoneState struct {
	fused       [numCriteria]ema
	crit        [numCriteria]Level
	track       tracker
	lastCapture time.Time
	episode     string
	startMS     int64
	lastUpdate  time.Time
	// peakLevel and peak: the highest level and severity an event of the
	// episode carried a snapshot of.
	peakLevel Level
	peak      float64
	last      ZoneRisk
	// domainShift: the episode opened while the camera was shifted.
	domainShift bool
}

func (z *zoneState) fusedValues() Fused {
	f := Fused{OODFraction: float32(z.fused[critOOD].value), AleatoricFraction: float32(z.fused[critAleatoric].value)}
	if d := &z.fused[critDepth]; d.primed {
		f.PessimisticDepth, f.HasDepth = float32(d.value), true
	}
	if c := &z.fused[critConfidence]; c.primed {
		f.ConfidenceFraction, f.HasConfidence = float32(c.value), true
	}
	return f
}

// Engine turns frames into events for one camera and owns that camera's
// episodes: it opens, continues, reloads and ends them, and delivers the
// events and zone states to its Sink. A multi-camera runtime runs one
// engine per camera over shared sinks. An Engine is not safe for
// concurrent use.
type Engine struct {
	cfg      EngineConfig
	cal      Calibration
	assessor *Assessor
	zones    []zoneState
	names    []string
	sink     Sink
	counter  uint64
	events   []Event // scratch, reused

	started     time.Time
	lastFrameAt time.Time
	lastCapture time.Time
	lastSeq     uint64
	haveSeq     bool
	stalled     bool
	stallID     string
	stallStart  int64
	mfault      modelFaultState  // modelfault.go
	dshift      domainShiftState // domainshift.go
	frames      uint64
	dropped     uint64
	winFrames   uint64
	winStart    time.Time
	latSum      float64
	latMax      float64
	lastStats   time.Time
	// version counts the changes of the engine's episode state (frames,
	// stall faults, reloads): a prepared reload is refused when the engine
	// changed after it was prepared.
	version uint64
	// retired: the camera was removed (PrepareRemove applied); no
	// further reload or removal is accepted.
	retired bool
}

// NewEngine validates the spec and builds an engine that delivers to sink
// (nil: events are decided and dropped). Sinks implementing ZoneSetSink
// learn the zones, and every zone's initial state is delivered.
func NewEngine(spec EngineSpec, sink Sink) (*Engine, error) {
	switch sink.(type) {
	case nil:
		sink = Sinks{}
	case Sinks:
	default:
		sink = Sinks{sink} // its errors name it (SinkError)
	}
	cfg := spec.Config
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if !cameraPattern.MatchString(cfg.Camera) {
		return nil, fmt.Errorf("new engine: camera %q must match %s", cfg.Camera, cameraPattern)
	}
	if err := cfg.Timing.Validate("events"); err != nil {
		return nil, fmt.Errorf("new engine: %w", err)
	}
	if err := cfg.DomainPolicy.Validate("domain.policy"); err != nil {
		return nil, fmt.Errorf("new engine: %w", err)
	}
	a, err := NewAssessor(spec.Zones, spec.Ignore, spec.Calibration)
	if err != nil {
		return nil, fmt.Errorf("new engine: %w", err)
	}
	now := cfg.Now()
	e := &Engine{cfg: cfg, sink: sink, started: now, winStart: now, lastStats: now}
	e.install(a, spec.Calibration)
	return e, e.announce(now)
}

// install swaps in an assessor and resets the zones.
func (e *Engine) install(a *Assessor, cal Calibration) {
	e.assessor, e.cal = a, cal
	e.zones = make([]zoneState, len(a.zones))
	e.names = make([]string, len(a.zones))
	for i, z := range a.zones {
		e.names[i] = z.Name
	}
}

// announce tells the sinks the zones and delivers every zone's state.
func (e *Engine) announce(now time.Time) error {
	var errs []error
	if zs, ok := e.sink.(ZoneSetSink); ok {
		if err := zs.Zones(e.cfg.Vehicle, e.cfg.Camera, e.names); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, e.deliverStates(now))...)
}

func (e *Engine) deliverStates(now time.Time) error {
	var errs []error
	for i := range e.zones {
		st := e.state(i, now)
		if err := e.sink.State(&st); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Observe assesses one frame, fuses each zone's signals, steps its level
// and episode, and delivers the events it raises, then the states of the
// zones concerned. It returns the assessment's error, or the sinks'
// errors joined after every event was delivered. Without events it does
// not allocate.
func (e *Engine) Observe(f Frame, m Maps) error {
	if f.Camera != "" && f.Camera != e.cfg.Camera {
		return fmt.Errorf("observe: frame from camera %q, engine is for %q", f.Camera, e.cfg.Camera)
	}
	risks, err := e.assessor.Assess(m)
	if err != nil {
		return fmt.Errorf("observe camera %q frame %d: %w", e.cfg.Camera, f.Seq, err)
	}
	return e.step(f, risks, &m)
}

// ObserveRisks is Observe on zone metrics assessed elsewhere (one per
// zone, in the order of Zones): replays of recorded drives use it to try
// other Timings. Without maps there are no snapshots.
func (e *Engine) ObserveRisks(f Frame, risks []ZoneRisk) error {
	if len(risks) != len(e.zones) {
		return fmt.Errorf("observe risks: %d zone metrics for %d zones", len(risks), len(e.zones))
	}
	for i := range risks {
		if risks[i].Zone != e.names[i] {
			return fmt.Errorf("observe risks: metrics %d are of zone %q, want %q", i, risks[i].Zone, e.names[i])
		}
	}
	return e.step(f, risks, nil)
}

// LastRisks are the zone metrics of the last frame, in the order of Zones;
// the slice is the engine's and valid until the next frame.
func (e *Engine) LastRisks() []ZoneRisk { return e.assessor.out }

// step fuses, steps and delivers one frame's zone metrics; m is nil when
// the maps are not known (no snapshots).
func (e *Engine) step(f Frame, risks []ZoneRisk, m *Maps) error {
	now := e.cfg.Now()
	e.version++
	e.frames++
	e.winFrames++
	if e.haveSeq && f.Seq > e.lastSeq+1 {
		e.dropped += f.Seq - e.lastSeq - 1
	}
	e.lastSeq, e.haveSeq = f.Seq, true
	e.lastFrameAt, e.lastCapture = now, f.Capture
	lat := float64(now.Sub(f.Capture)) / float64(time.Millisecond)
	e.latSum += lat
	e.latMax = max(e.latMax, lat)
	tms := f.Capture.UnixMilli()
	evs := e.events[:0]
	if e.stalled {
		e.stalled = false
		evs = append(evs, e.faultEvent(EventEnd, LevelOK, LevelCritical, tms, f.Seq))
	}
	evs = e.endModelFault(evs, tms, f.Seq)
	tm := e.cfg.Timing
	lv := e.cal.Levels
	suppress := e.dshift.open && e.cfg.DomainPolicy == DomainSuppress
	var stateErr error
	for i := range risks {
		r := &risks[i]
		z := &e.zones[i]
		z.last = *r
		dt := f.Capture.Sub(z.lastCapture)
		z.lastCapture = f.Capture
		tau := tm.FusionTimeConstant
		ood := z.fused[critOOD].add(float64(r.OODFraction), dt, tau)
		alea := z.fused[critAleatoric].add(float64(r.AleatoricFraction), dt, tau)
		if lv.OODFraction != nil {
			z.crit[critOOD] = lv.OODFraction.step(ood, z.crit[critOOD], true)
		}
		if lv.AleatoricFraction != nil {
			z.crit[critAleatoric] = lv.AleatoricFraction.step(alea, z.crit[critAleatoric], true)
		}
		if r.HasDepth() {
			d := z.fused[critDepth].add(float64(r.PessimisticDepth), dt, tau)
			if lv.PessimisticDepth != nil {
				z.crit[critDepth] = lv.PessimisticDepth.step(d, z.crit[critDepth], false)
			}
		} else {
			z.crit[critDepth] = LevelOK
		}
		if r.ConfidenceValid > 0 {
			c := z.fused[critConfidence].add(float64(r.ConfidenceFraction), dt, tau)
			if lv.ConfidenceFraction != nil {
				z.crit[critConfidence] = lv.ConfidenceFraction.step(c, z.crit[critConfidence], true)
			}
		} else {
			// No confidence in the zone this frame (no map, or NaN
			// everywhere): the criterion holds no level.
			z.crit[critConfidence] = LevelOK
		}
		target := max(z.crit[critOOD], z.crit[critAleatoric], z.crit[critDepth], z.crit[critConfidence])
		hold := e.hold(z, r.HasDepth())
		if suppress {
			target, hold = LevelOK, LevelOK
		}
		tr, prev := z.track.step(f.Capture, target, hold, tm)
		switch tr {
		case opened:
			e.counter++
			z.startMS = tms
			z.episode = e.cfg.Camera + "-" + r.Zone + "-" + strconv.FormatInt(tms, 10) + "-" + strconv.FormatUint(e.counter, 10)
			z.lastUpdate = f.Capture
			z.peakLevel, z.peak = LevelOK, 0
			z.domainShift = e.dshift.open
			evs = append(evs, e.zoneEvent(EventNew, i, prev, tms, f.Seq))
		case reopened, changed:
			z.lastUpdate = f.Capture
			evs = append(evs, e.zoneEvent(EventUpdate, i, prev, tms, f.Seq))
		case closed:
			evs = append(evs, e.zoneEvent(EventEnd, i, z.track.lastRaised, tms, f.Seq))
			z.episode = ""
		case lowered:
			// Back at ok inside the merge window: the state says so, the
			// event stream waits for the end (or the episode's return).
			st := e.state(i, f.Capture)
			if err := e.sink.State(&st); err != nil {
				stateErr = errors.Join(stateErr, err)
			}
		default:
			if z.episode != "" && !z.track.closing && e.cfg.UpdateInterval > 0 && f.Capture.Sub(z.lastUpdate) >= e.cfg.UpdateInterval {
				z.lastUpdate = f.Capture
				evs = append(evs, e.zoneEvent(EventUpdate, i, prev, tms, f.Seq))
			}
		}
	}
	e.events = evs
	return errors.Join(stateErr, e.deliver(evs, f, m))
}

// hold is the level the zone's criteria would keep from the top: the
// highest level whose exit threshold every fused value is still beyond
// (the merge window's bar for a return).
func (e *Engine) hold(z *zoneState, hasDepth bool) Level {
	lv := e.cal.Levels
	h := LevelOK
	if lv.OODFraction != nil {
		h = max(h, lv.OODFraction.step(z.fused[critOOD].value, LevelCritical, true))
	}
	if lv.AleatoricFraction != nil {
		h = max(h, lv.AleatoricFraction.step(z.fused[critAleatoric].value, LevelCritical, true))
	}
	if lv.PessimisticDepth != nil && hasDepth {
		h = max(h, lv.PessimisticDepth.step(z.fused[critDepth].value, LevelCritical, false))
	}
	if lv.ConfidenceFraction != nil && z.fused[critConfidence].primed {
		h = max(h, lv.ConfidenceFraction.step(z.fused[critConfidence].value, LevelCritical, true))
	}
	return h
}

// deliver hands events to the sink: for a zone event the snapshot first
// (when one is due and the frame has an image and maps), then the event,
// then the zone's state.
func (e *Engine) deliver(evs []Event, f Frame, m *Maps) error {
	var errs []error
	snaps, _ := e.sink.(SnapshotSink)
	for i := range evs {
		ev := &evs[i]
		zi := -1
		if ev.Kind == KindZone {
			zi = e.zoneIndex(ev.Zone)
		}
		if zi >= 0 && snaps != nil && f.Image != nil && m != nil && e.snapshotDue(zi, ev) {
			ev.Snapshot = &SnapshotRef{FrameSeq: ev.FrameSeq, TimeMS: ev.TimeMS}
			s := Snapshot{Event: ev, Zone: e.assessor.zones[zi], Image: *f.Image, Maps: *m, TauE: e.cal.tauEFor(ev.Zone)}
			if err := snaps.Snapshot(&s); err != nil {
				errs = append(errs, fmt.Errorf("snapshot of %s: %w", ev.ID, err))
			}
		}
		if err := e.sink.Event(ev); err != nil {
			errs = append(errs, err)
		}
		if zi >= 0 {
			st := e.state(zi, time.UnixMilli(ev.TimeMS))
			if err := e.sink.State(&st); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (e *Engine) zoneIndex(name string) int {
	for i, n := range e.names {
		if n == name {
			return i
		}
	}
	return -1
}

// snapshotPeakGain is how much an update's severity must exceed the
// episode's last snapshot, at the same level, to count as a new peak.
const snapshotPeakGain = 1.1

// snapshotDue decides whether an event gets a snapshot: the new event of
// an episode, and every later event that reaches a new peak (a higher
// level than any earlier snapshot, or the same level with a severity at
// least snapshotPeakGain times the last snapshot's).
func (e *Engine) snapshotDue(zi int, ev *Event) bool {
	z := &e.zones[zi]
	if ev.Type == EventEnd || ev.Level == LevelOK {
		return false
	}
	sev := e.severity(z)
	if ev.Type != EventNew && !(ev.Level > z.peakLevel || (ev.Level == z.peakLevel && sev >= snapshotPeakGain*z.peak)) {
		return false
	}
	z.peakLevel, z.peak = ev.Level, sev
	return true
}

// severity is how far a zone's fused signals are beyond their warn entry
// thresholds (1 = at the threshold): the largest of fused/enter for the
// fractions and enter/fused for the pessimistic depth.
func (e *Engine) severity(z *zoneState) float64 {
	s := 0.0
	lv := e.cal.Levels
	if c := lv.OODFraction; c != nil && c.Warn.Enter > 0 {
		s = max(s, z.fused[critOOD].value/c.Warn.Enter)
	}
	if c := lv.AleatoricFraction; c != nil && c.Warn.Enter > 0 {
		s = max(s, z.fused[critAleatoric].value/c.Warn.Enter)
	}
	if c := lv.ConfidenceFraction; c != nil && c.Warn.Enter > 0 && z.fused[critConfidence].primed {
		s = max(s, z.fused[critConfidence].value/c.Warn.Enter)
	}
	if c := lv.PessimisticDepth; c != nil && z.fused[critDepth].primed {
		s = max(s, c.Warn.Enter/math.Max(z.fused[critDepth].value, 1e-3))
	}
	return s
}

func (e *Engine) zoneEvent(t EventType, zi int, prev Level, tms int64, frame uint64) Event {
	z := &e.zones[zi]
	level := z.track.level
	// Reasons are every criterion above ok, not only those at the zone's
	// level: a subscriber learns that the depth is also unreliable
	// (aleatoric) while the scene is unknown (epistemic).
	reasons := []string{}
	if t != EventEnd && level > LevelOK {
		for i, l := range z.crit {
			if l > LevelOK {
				reasons = append(reasons, criterionNames[i])
			}
		}
	}
	if t == EventEnd {
		level = LevelOK
	}
	return Event{Schema: EventSchemaID, ID: z.episode, Type: t, Kind: KindZone,
		Vehicle: e.cfg.Vehicle, Camera: e.cfg.Camera, Zone: e.names[zi],
		Level: level, Previous: prev, Reasons: reasons,
		StartMS: z.startMS, TimeMS: tms, FrameSeq: frame, Metrics: metricsOf(z.last, z.fusedValues()), DomainShift: z.domainShift}
}

func (e *Engine) faultEvent(t EventType, level, prev Level, tms int64, frame uint64) Event {
	return Event{Schema: EventSchemaID, ID: e.stallID, Type: t, Kind: KindCameraFault,
		Vehicle: e.cfg.Vehicle, Camera: e.cfg.Camera, Fault: FaultCameraStalled,
		Level: level, Previous: prev, Reasons: []string{FaultCameraStalled},
		StartMS: e.stallStart, TimeMS: tms, FrameSeq: e.lastSeq}
}

// Tick runs at wall time now, also when no frames arrive: it raises a
// camera fault when the camera delivered no frame for StallAfter, and every
// StatsInterval it delivers the stats (to a StatsSink) and every zone's
// state with its fused signals.
func (e *Engine) Tick(now time.Time) error {
	var errs []error
	if e.cfg.StallAfter > 0 && !e.stalled {
		last := e.lastFrameAt
		if last.IsZero() {
			last = e.started
		}
		if now.Sub(last) >= e.cfg.StallAfter {
			e.version++
			e.stalled = true
			e.counter++
			e.stallStart = now.UnixMilli()
			e.stallID = e.cfg.Camera + "-camera-" + strconv.FormatInt(e.stallStart, 10) + "-" + strconv.FormatUint(e.counter, 10)
			ev := e.faultEvent(EventNew, LevelCritical, LevelOK, e.stallStart, e.lastSeq)
			if err := e.sink.Event(&ev); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if e.cfg.StatsInterval > 0 && now.Sub(e.lastStats) >= e.cfg.StatsInterval {
		e.lastStats = now
		if ss, ok := e.sink.(StatsSink); ok {
			st := e.Stats(now)
			if err := ss.Stats(&st); err != nil {
				errs = append(errs, err)
			}
		}
		errs = append(errs, e.deliverStates(now))
	}
	return errors.Join(errs...)
}

// endAll ends every open episode, zone risks (no reasons, as the engine's
// own end events) and a camera fault alike, at wall time now.
func (e *Engine) endAll(now time.Time) error {
	tms := now.UnixMilli()
	var errs []error
	for i := range e.zones {
		z := &e.zones[i]
		open, prev := z.track.end(now)
		if !open {
			continue
		}
		ev := Event{Schema: EventSchemaID, ID: z.episode, Type: EventEnd, Kind: KindZone,
			Vehicle: e.cfg.Vehicle, Camera: e.cfg.Camera, Zone: e.names[i], Level: LevelOK, Previous: prev,
			Reasons: []string{}, StartMS: z.startMS, TimeMS: tms, FrameSeq: e.lastSeq, DomainShift: z.domainShift}
		z.episode = ""
		if err := e.sink.Event(&ev); err != nil {
			errs = append(errs, err)
		}
		st := e.state(i, now)
		if err := e.sink.State(&st); err != nil {
			errs = append(errs, err)
		}
	}
	if e.stalled {
		e.stalled = false
		ev := e.faultEvent(EventEnd, LevelOK, LevelCritical, tms, e.lastSeq)
		if err := e.sink.Event(&ev); err != nil {
			errs = append(errs, err)
		}
	}
	for _, ev := range e.endDomainShift(e.endModelFault(nil, tms, e.lastSeq), tms, e.lastSeq) {
		if err := e.sink.Event(&ev); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close ends every open episode (a restarted engine knows nothing of them,
// so no subscriber is left with an episode that never ends). Call it
// before closing the sinks.
func (e *Engine) Close(now time.Time) error {
	if e.retired {
		return nil // its episodes ended when it was removed
	}
	return e.endAll(now)
}

// Zones returns the zones in assessment order; the caller must not modify them.
func (e *Engine) Zones() []Zone { return e.assessor.zones }

// Calibration returns the calibration in use.
func (e *Engine) Calibration() Calibration { return e.cal }

// Config returns the engine's configuration.
func (e *Engine) Config() EngineConfig { return e.cfg }

// ZoneStatus returns zone i's level, fused signals and episode (i in
// [0, len(Zones()))). It does not allocate.
func (e *Engine) ZoneStatus(i int) ZoneStatus {
	z := &e.zones[i]
	return ZoneStatus{Name: e.names[i], Level: z.track.level, Fused: z.fusedValues(), Episode: z.episode, Closing: z.track.closing}
}

// state is zone i's State at time t.
func (e *Engine) state(i int, t time.Time) State { return e.stateOf(&e.zones[i], e.names[i], t) }

// stateOf is the State of zone z, named name, at time t.
func (e *Engine) stateOf(z *zoneState, name string, t time.Time) State {
	s := State{Schema: StateSchemaID, Vehicle: e.cfg.Vehicle, Camera: e.cfg.Camera,
		Zone: name, Level: z.track.level, EpisodeID: z.episode, TimeMS: t.UnixMilli()}
	if !z.track.since.IsZero() {
		s.SinceMS = z.track.since.UnixMilli()
	} else {
		s.SinceMS = e.started.UnixMilli()
	}
	if z.last.Pixels > 0 || z.last.Valid > 0 {
		s.Metrics = metricsOf(z.last, z.fusedValues())
	}
	return s
}

// States returns the current state of every zone.
func (e *Engine) States(now time.Time) []State {
	out := make([]State, len(e.zones))
	for i := range e.zones {
		out[i] = e.state(i, now)
	}
	return out
}

// Stats returns the statistics since the previous call and starts a new window.
func (e *Engine) Stats(now time.Time) Stats {
	s := Stats{Schema: StatsSchemaID, Vehicle: e.cfg.Vehicle, Camera: e.cfg.Camera,
		TimeMS: now.UnixMilli(), Frames: e.frames, DroppedFrames: e.dropped, CameraStalled: e.stalled}
	if el := now.Sub(e.winStart).Seconds(); el > 0 {
		s.FPS = round3(float64(e.winFrames) / el)
	}
	if e.winFrames > 0 {
		s.LatencyMeanMS = round3(e.latSum / float64(e.winFrames))
		s.LatencyMaxMS = round3(e.latMax)
	}
	e.winFrames, e.winStart, e.latSum, e.latMax = 0, now, 0, 0
	return s
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
