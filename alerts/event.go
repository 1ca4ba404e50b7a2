package alerts

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
	// ConfidenceFraction is present when the depth model has a confidence
	// output (ZoneRisk.ConfidenceValid > 0).
	ConfidenceFraction *float32 `json:"confidence_fraction,omitempty"`
	// Fused are the zone's signals after temporal fusion (Timing): what
	// the levels are decided on.
	Fused *FusedMetrics `json:"fused,omitempty"`
}

// FusedMetrics is the JSON form of Fused.
type FusedMetrics struct {
	OODFraction       float32  `json:"ood_fraction"`
	AleatoricFraction float32  `json:"aleatoric_fraction"`
	PessimisticDepth  *float32 `json:"pessimistic_depth_m"`
	// ConfidenceFraction is present when the calibration has the
	// confidence_fraction criterion.
	ConfidenceFraction *float32 `json:"confidence_fraction,omitempty"`
}

func metricsOf(r ZoneRisk, f Fused) *Metrics {
	m := &Metrics{Pixels: r.Pixels, Valid: r.Valid, OODFraction: r.OODFraction,
		EpistemicP95: r.EpistemicP95, AleatoricFraction: r.AleatoricFraction}
	if r.HasDepth() {
		n, p := r.NearestDepth, r.PessimisticDepth
		m.NearestDepth, m.PessimisticDepth = &n, &p
	}
	if r.ConfidenceValid > 0 {
		c := r.ConfidenceFraction
		m.ConfidenceFraction = &c
	}
	m.Fused = &FusedMetrics{OODFraction: f.OODFraction, AleatoricFraction: f.AleatoricFraction}
	if f.HasConfidence {
		c := f.ConfidenceFraction
		m.Fused.ConfidenceFraction = &c
	}
	if f.HasDepth {
		d := f.PessimisticDepth
		m.Fused.PessimisticDepth = &d
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
	// DomainShift marks a zone episode opened while the camera's frames
	// were unlike the models' training domain (a domain_shift episode
	// open): its uncertainty may be an artefact of the foreign frames.
	DomainShift bool `json:"domain_shift,omitempty"`
	// Domain is a domain_shift event's reading: the frame's distance, its
	// smoothed value, the threshold and the window.
	Domain *DomainMetrics `json:"domain,omitempty"`
	// Snapshot names the picture of this event's frame, when snapshots
	// are on: at an episode's new event and at its peaks.
	Snapshot *SnapshotRef `json:"snapshot,omitempty"`
}

// SnapshotRef names an event's snapshot. The engine sets the frame; the
// snapshot sinks set where it can be fetched.
type SnapshotRef struct {
	// Path on the debug page's HTTP server: /api/events/<id>/snapshot.jpg.
	Path string `json:"path,omitempty"`
	// Topic of the retained binary JPEG: <prefix>/<vehicle>/<camera>/<zone>/snapshot.
	Topic string `json:"topic,omitempty"`
	// FrameSeq and TimeMS are the event's frame (its capture time).
	FrameSeq uint64 `json:"frame_seq"`
	TimeMS   int64  `json:"time_ms"`
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
