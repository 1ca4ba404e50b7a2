package alerts

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Schema identifiers carried in every payload; they name the JSON Schema
// files in alerts/schema.
const (
	EventSchemaID = "didoedge.event/1"
	StateSchemaID = "didoedge.state/1"
	StatsSchemaID = "didoedge.stats/1"
)

// EventType is the place of an event in its episode.
type EventType string

// Event types. An episode is one new event, any number of updates, and one end.
const (
	EventNew    EventType = "new"
	EventUpdate EventType = "update"
	EventEnd    EventType = "end"
)

// EventKind tells zone risk episodes from camera faults.
type EventKind string

// Event kinds.
const (
	KindZone        EventKind = "zone"
	KindCameraFault EventKind = "camera_fault"
)

// FaultCameraStalled is the fault code of a camera that stopped delivering frames.
const FaultCameraStalled = "camera_stalled"

// Metrics is the JSON form of ZoneRisk. Depths are null when the zone had
// no valid pixel.
type Metrics struct {
	Pixels            int      `json:"pixels"`
	Valid             int      `json:"valid"`
	OODFraction       float32  `json:"ood_fraction"`
	EpistemicP95      float32  `json:"epistemic_p95"`
	AleatoricFraction float32  `json:"aleatoric_fraction"`
	NearestDepth      *float32 `json:"nearest_depth_m"`
	PessimisticDepth  *float32 `json:"pessimistic_depth_m"`
}

func metricsOf(r ZoneRisk) *Metrics {
	m := &Metrics{Pixels: r.Pixels, Valid: r.Valid, OODFraction: r.OODFraction,
		EpistemicP95: r.EpistemicP95, AleatoricFraction: r.AleatoricFraction}
	if r.HasDepth() {
		n, p := r.NearestDepth, r.PessimisticDepth
		m.NearestDepth, m.PessimisticDepth = &n, &p
	}
	return m
}

// Event is one alert event. Seq is assigned by the publisher's outbox when
// the event is queued: it is monotonic per outbox and survives restarts.
type Event struct {
	Schema   string    `json:"schema"`
	Seq      uint64    `json:"seq"`
	ID       string    `json:"id"`
	Type     EventType `json:"type"`
	Kind     EventKind `json:"kind"`
	Vehicle  string    `json:"vehicle"`
	Camera   string    `json:"camera"`
	Zone     string    `json:"zone,omitempty"`
	Fault    string    `json:"fault,omitempty"`
	Level    Level     `json:"level"`
	Previous Level     `json:"previous_level"`
	Reasons  []string  `json:"reasons"`
	StartMS  int64     `json:"start_ms"`
	TimeMS   int64     `json:"time_ms"`
	FrameSeq uint64    `json:"frame_seq"`
	Metrics  *Metrics  `json:"metrics,omitempty"`
}

// Droppable reports whether the outbox may drop the event when full: only
// zone updates are, since a later update or the end supersedes them.
func (e *Event) Droppable() bool { return e.Type == EventUpdate && e.Kind == KindZone }

// State is the retained state of one zone.
type State struct {
	Schema    string   `json:"schema"`
	Vehicle   string   `json:"vehicle"`
	Camera    string   `json:"camera"`
	Zone      string   `json:"zone"`
	Level     Level    `json:"level"`
	SinceMS   int64    `json:"since_ms"`
	EpisodeID string   `json:"episode_id,omitempty"`
	TimeMS    int64    `json:"time_ms"`
	Metrics   *Metrics `json:"metrics,omitempty"`
}

// Stats are periodic runtime statistics of one camera.
type Stats struct {
	Schema        string      `json:"schema"`
	Vehicle       string      `json:"vehicle"`
	Camera        string      `json:"camera"`
	TimeMS        int64       `json:"time_ms"`
	Frames        uint64      `json:"frames"`
	DroppedFrames uint64      `json:"dropped_frames"`
	FPS           float64     `json:"fps"`
	LatencyMeanMS float64     `json:"latency_mean_ms"`
	LatencyMaxMS  float64     `json:"latency_max_ms"`
	CameraStalled bool        `json:"camera_stalled"`
	Connected     bool        `json:"connected"`
	Outbox        OutboxStats `json:"outbox"`
}

// OutboxStats are the publisher's queue counters, filled by the publisher.
type OutboxStats struct {
	Pending        int    `json:"pending"`
	PendingBytes   int64  `json:"pending_bytes"`
	Published      uint64 `json:"published"`
	DroppedUpdates uint64 `json:"dropped_updates"`
	Refused        uint64 `json:"refused"`
}

// Frame is the metadata of one frame.
type Frame struct {
	// Seq is the camera's frame sequence number; gaps count as dropped frames.
	Seq uint64
	// Capture is when the frame was captured.
	Capture time.Time
	// Camera must be empty or equal the engine's camera.
	Camera string
}

// EngineConfig configures an Engine.
type EngineConfig struct {
	Vehicle, Camera string
	// InertiaFrames: consecutive frames a new level must be the target
	// before the zone changes level (at least 1).
	InertiaFrames int
	// MinHold: a level is not lowered before it has been held this long.
	MinHold time.Duration
	// UpdateInterval: while an episode lasts, an update event with fresh
	// metrics at most this often (0: only on level changes).
	UpdateInterval time.Duration
	// StallAfter: no frame for this long raises a camera fault (0: off).
	StallAfter time.Duration
	// Now is the wall clock (latency, stall detection); nil means time.Now.
	Now func() time.Time
}

type zoneState struct {
	crit       [3]Level // per criterion: ood, aleatoric, depth
	tracker    levelTracker
	episode    string
	startMS    int64
	lastUpdate time.Time
	last       ZoneRisk
}

// Engine turns frames into events. It is not safe for concurrent use.
type Engine struct {
	cfg      EngineConfig
	cal      Calibration
	assessor *Assessor
	zones    []zoneState
	counter  uint64

	started     time.Time
	lastFrameAt time.Time
	lastSeq     uint64
	haveSeq     bool
	stalled     bool
	stallID     string
	stallStart  int64
	frames      uint64
	dropped     uint64
	winFrames   uint64
	winStart    time.Time
	latSum      float64
	latMax      float64
}

// NewEngine validates its inputs and builds an engine for the zones.
func NewEngine(cfg EngineConfig, zones, ignore []Zone, cal Calibration) (*Engine, error) {
	if cfg.InertiaFrames < 1 {
		cfg.InertiaFrames = 1
	}
	if !cameraPattern.MatchString(cfg.Camera) {
		return nil, fmt.Errorf("new engine: camera %q must match %s", cfg.Camera, cameraPattern)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a, err := NewAssessor(zones, ignore, cal)
	if err != nil {
		return nil, fmt.Errorf("new engine: %w", err)
	}
	now := cfg.Now()
	return &Engine{cfg: cfg, cal: cal, assessor: a, zones: make([]zoneState, len(zones)),
		started: now, winStart: now}, nil
}

// Observe assesses one frame and appends the events it raises to dst.
// Without events it does not allocate.
func (e *Engine) Observe(f Frame, m Maps, dst []Event) ([]Event, error) {
	if f.Camera != "" && f.Camera != e.cfg.Camera {
		return dst, fmt.Errorf("observe: frame from camera %q, engine is for %q", f.Camera, e.cfg.Camera)
	}
	risks, err := e.assessor.Assess(m)
	if err != nil {
		return dst, fmt.Errorf("observe camera %q frame %d: %w", e.cfg.Camera, f.Seq, err)
	}
	now := e.cfg.Now()
	e.frames++
	e.winFrames++
	if e.haveSeq && f.Seq > e.lastSeq+1 {
		e.dropped += f.Seq - e.lastSeq - 1
	}
	e.lastSeq, e.haveSeq = f.Seq, true
	e.lastFrameAt = now
	lat := float64(now.Sub(f.Capture)) / float64(time.Millisecond)
	e.latSum += lat
	e.latMax = max(e.latMax, lat)
	tms := f.Capture.UnixMilli()
	if e.stalled {
		e.stalled = false
		dst = append(dst, e.faultEvent(EventEnd, LevelOK, LevelCritical, tms, f.Seq))
	}
	lv := e.cal.Levels
	for i := range risks {
		r := &risks[i]
		z := &e.zones[i]
		z.last = *r
		if lv.OODFraction != nil {
			z.crit[0] = lv.OODFraction.step(float64(r.OODFraction), z.crit[0], true)
		}
		if lv.AleatoricFraction != nil {
			z.crit[1] = lv.AleatoricFraction.step(float64(r.AleatoricFraction), z.crit[1], true)
		}
		if lv.PessimisticDepth != nil {
			if r.HasDepth() {
				z.crit[2] = lv.PessimisticDepth.step(float64(r.PessimisticDepth), z.crit[2], false)
			} else {
				z.crit[2] = LevelOK
			}
		}
		target := max(z.crit[0], z.crit[1], z.crit[2])
		prev := z.tracker.level
		changed := z.tracker.step(target, f.Capture, e.cfg.InertiaFrames, e.cfg.MinHold)
		switch {
		case changed && prev == LevelOK:
			e.counter++
			z.startMS = tms
			z.episode = e.cfg.Camera + "-" + r.Zone + "-" + strconv.FormatInt(tms, 10) + "-" + strconv.FormatUint(e.counter, 10)
			z.lastUpdate = f.Capture
			dst = append(dst, e.zoneEvent(EventNew, z, r, prev, tms, f.Seq))
		case changed && z.tracker.level == LevelOK:
			dst = append(dst, e.zoneEvent(EventEnd, z, r, prev, tms, f.Seq))
			z.episode = ""
		case changed:
			z.lastUpdate = f.Capture
			dst = append(dst, e.zoneEvent(EventUpdate, z, r, prev, tms, f.Seq))
		case z.episode != "" && e.cfg.UpdateInterval > 0 && f.Capture.Sub(z.lastUpdate) >= e.cfg.UpdateInterval:
			z.lastUpdate = f.Capture
			dst = append(dst, e.zoneEvent(EventUpdate, z, r, prev, tms, f.Seq))
		}
	}
	return dst, nil
}

var criterionNames = [3]string{"ood_fraction", "aleatoric_fraction", "pessimistic_depth_m"}

func (e *Engine) zoneEvent(t EventType, z *zoneState, r *ZoneRisk, prev Level, tms int64, frame uint64) Event {
	reasons := []string{}
	if z.tracker.level > LevelOK {
		for i, l := range z.crit {
			if l == z.tracker.level {
				reasons = append(reasons, criterionNames[i])
			}
		}
	}
	return Event{Schema: EventSchemaID, ID: z.episode, Type: t, Kind: KindZone,
		Vehicle: e.cfg.Vehicle, Camera: e.cfg.Camera, Zone: r.Zone,
		Level: z.tracker.level, Previous: prev, Reasons: reasons,
		StartMS: z.startMS, TimeMS: tms, FrameSeq: frame, Metrics: metricsOf(*r)}
}

func (e *Engine) faultEvent(t EventType, level, prev Level, tms int64, frame uint64) Event {
	return Event{Schema: EventSchemaID, ID: e.stallID, Type: t, Kind: KindCameraFault,
		Vehicle: e.cfg.Vehicle, Camera: e.cfg.Camera, Fault: FaultCameraStalled,
		Level: level, Previous: prev, Reasons: []string{FaultCameraStalled},
		StartMS: e.stallStart, TimeMS: tms, FrameSeq: e.lastSeq}
}

// Tick checks for a stalled camera at wall time now and appends a
// camera-fault event when the camera has delivered no frame for StallAfter.
// The runtime calls it periodically, also when no frames arrive.
func (e *Engine) Tick(now time.Time, dst []Event) []Event {
	if e.cfg.StallAfter <= 0 || e.stalled {
		return dst
	}
	last := e.lastFrameAt
	if last.IsZero() {
		last = e.started
	}
	if now.Sub(last) < e.cfg.StallAfter {
		return dst
	}
	e.stalled = true
	e.counter++
	e.stallStart = now.UnixMilli()
	e.stallID = e.cfg.Camera + "-camera-" + strconv.FormatInt(e.stallStart, 10) + "-" + strconv.FormatUint(e.counter, 10)
	return append(dst, e.faultEvent(EventNew, LevelCritical, LevelOK, e.stallStart, e.lastSeq))
}

// States returns the current state of every zone.
func (e *Engine) States(now time.Time) []State {
	out := make([]State, len(e.zones))
	for i := range e.zones {
		z := &e.zones[i]
		s := State{Schema: StateSchemaID, Vehicle: e.cfg.Vehicle, Camera: e.cfg.Camera,
			Zone: e.assessor.zones[i].Name, Level: z.tracker.level, EpisodeID: z.episode,
			TimeMS: now.UnixMilli()}
		if !z.tracker.since.IsZero() {
			s.SinceMS = z.tracker.since.UnixMilli()
		} else {
			s.SinceMS = e.started.UnixMilli()
		}
		if z.last.Pixels > 0 || z.last.Valid > 0 {
			s.Metrics = metricsOf(z.last)
		}
		out[i] = s
	}
	return out
}

// StateOf returns the state of the zone an event is about.
func (e *Engine) StateOf(ev *Event) (State, bool) {
	for i, z := range e.assessor.zones {
		if z.Name == ev.Zone {
			return e.States(time.UnixMilli(ev.TimeMS))[i], true
		}
	}
	return State{}, false
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
