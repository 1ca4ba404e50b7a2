package alerts

import (
	"errors"
	"fmt"
)

// Sink receives what an Engine decides: events and zone states. The MQTT
// publisher (alerts/mqttpub) is one implementation, the snapshot store
// (alerts/snapshot) another, and the runtime adds its own to count and
// print events. An engine calls its sink from the goroutine that drives
// it; a Sink shared by several engines (one per camera) must be safe for
// concurrent use.
//
// The design follows the small transport interfaces of frigate (its
// Communicator: publish what the tracker decided) and mochi-mqtt (hooks
// that implement only what they need): the domain decides, sinks deliver.
type Sink interface {
	// Event delivers one event, in the engine's order. A durable sink
	// numbers it (sets Seq) before it returns, so that sinks after it in
	// a Sinks list see the number. An error means this sink could not take
	// the event; the engine goes on with the next event.
	Event(ev *Event) error
	// State delivers a zone's current state: on every level change, every
	// event and every stats interval. Transports keep the last one per
	// zone (MQTT: retained).
	State(st *State) error
}

// BatchSink is implemented by a durable sink that queues several events
// all or nothing (the MQTT outbox). A reload queues the end events of every
// camera through it before any engine changes (ApplyReloads), so that a
// full outbox or a full disk refuses the reload instead of half-applying
// it.
type BatchSink interface {
	Sink
	// EventBatch numbers and stores every event (sets each Seq) or none
	// (each Seq stays 0) and says why.
	EventBatch(evs []*Event) error
}

// StatsSink is implemented by sinks that publish the engine's periodic
// statistics.
type StatsSink interface {
	Stats(s *Stats) error
}

// SnapshotSink is implemented by sinks that take event snapshots. The
// engine calls Snapshot before it delivers the event the snapshot
// illustrates, so that a sink can name the snapshot in the event
// (Event.Snapshot) and a subscriber never reads an event whose snapshot is
// not there yet.
type SnapshotSink interface {
	Snapshot(s *Snapshot) error
}

// ZoneSetSink is implemented by sinks that announce a camera's zones (Home
// Assistant discovery): the engine calls Zones when it starts and after a
// reload with the zones now assessed.
type ZoneSetSink interface {
	Zones(vehicle, camera string, zones []string) error
}

// CameraRemovedSink is implemented by sinks that keep per-camera state
// beyond events (retained zone states, snapshots and Home Assistant
// discovery on MQTT): when a camera leaves a running configuration
// (Engine.PrepareRemove applied), after its end events and closing
// states, the engine calls CameraRemoved with the zones it assessed, and
// the sink forgets the camera.
type CameraRemovedSink interface {
	CameraRemoved(vehicle, camera string, zones []string) error
}

// Sinks delivers to several sinks in order: put the durable one (the MQTT
// outbox, which numbers events) before the ones that want the number, and
// the snapshot renderer before the transport that publishes its JPEG.
// Every sink is called even when an earlier one fails; the errors are
// joined.
type Sinks []Sink

// Event implements Sink.
func (ss Sinks) Event(ev *Event) error {
	var errs []error
	for _, s := range ss {
		if err := s.Event(ev); err != nil {
			errs = append(errs, &SinkError{Sink: SinkName(s), Op: string(ev.Type) + " event " + ev.ID, Err: err})
		}
	}
	return errors.Join(errs...)
}

// State implements Sink.
func (ss Sinks) State(st *State) error {
	var errs []error
	for _, s := range ss {
		if err := s.State(st); err != nil {
			errs = append(errs, &SinkError{Sink: SinkName(s), Op: "state of zone " + st.Zone, Err: err})
		}
	}
	return errors.Join(errs...)
}

// Stats implements StatsSink for the sinks that do.
func (ss Sinks) Stats(st *Stats) error {
	var errs []error
	for _, s := range ss {
		if x, ok := s.(StatsSink); ok {
			if err := x.Stats(st); err != nil {
				errs = append(errs, &SinkError{Sink: SinkName(s), Op: "stats", Err: err})
			}
		}
	}
	return errors.Join(errs...)
}

// Snapshot implements SnapshotSink for the sinks that do.
func (ss Sinks) Snapshot(sn *Snapshot) error {
	var errs []error
	for _, s := range ss {
		if x, ok := s.(SnapshotSink); ok {
			if err := x.Snapshot(sn); err != nil {
				errs = append(errs, &SinkError{Sink: SinkName(s), Op: "snapshot", Err: err})
			}
		}
	}
	return errors.Join(errs...)
}

// Zones implements ZoneSetSink for the sinks that do.
func (ss Sinks) Zones(vehicle, camera string, zones []string) error {
	var errs []error
	for _, s := range ss {
		if x, ok := s.(ZoneSetSink); ok {
			if err := x.Zones(vehicle, camera, zones); err != nil {
				errs = append(errs, &SinkError{Sink: SinkName(s), Op: "zones", Err: err})
			}
		}
	}
	return errors.Join(errs...)
}

// CameraRemoved implements CameraRemovedSink for the sinks that do.
func (ss Sinks) CameraRemoved(vehicle, camera string, zones []string) error {
	var errs []error
	for _, s := range ss {
		if x, ok := s.(CameraRemovedSink); ok {
			if err := x.CameraRemoved(vehicle, camera, zones); err != nil {
				errs = append(errs, &SinkError{Sink: SinkName(s), Op: "camera removed", Err: err})
			}
		}
	}
	return errors.Join(errs...)
}

// SinkError is one sink's failure: the log names the sink that failed
// (the MQTT outbox, the snapshot renderer, the recorder), not only that a
// frame's events went wrong.
type SinkError struct {
	Sink string // SinkName of the sink
	Op   string // what it was handed: "new event cam-z-1", "state of zone z", "stats", ...
	Err  error
}

func (e *SinkError) Error() string { return "sink " + e.Sink + ": " + e.Op + ": " + e.Err.Error() }
func (e *SinkError) Unwrap() error { return e.Err }

// SinkName is a sink's name in errors and logs: its SinkName method's
// answer, else its Go type.
func SinkName(s any) string {
	if n, ok := s.(interface{ SinkName() string }); ok {
		return n.SinkName()
	}
	return fmt.Sprintf("%T", s)
}

// SinkFuncs adapts functions to a Sink; nil functions do nothing.
type SinkFuncs struct {
	OnEvent func(ev *Event) error
	OnState func(st *State) error
}

// Event implements Sink.
func (f SinkFuncs) Event(ev *Event) error {
	if f.OnEvent == nil {
		return nil
	}
	return f.OnEvent(ev)
}

// State implements Sink.
func (f SinkFuncs) State(st *State) error {
	if f.OnState == nil {
		return nil
	}
	return f.OnState(st)
}

// Image is an interleaved 8-bit RGB picture, row-major.
type Image struct {
	Width, Height int
	RGB           []uint8
}

// Snapshot is what a SnapshotSink gets for an event: the frame the event
// was decided on, its maps, and the zone. The slices belong to the engine's
// caller and are valid only during the call.
type Snapshot struct {
	// Event is the event the snapshot illustrates; a sink may fill in
	// Event.Snapshot (path, topic) before the event is delivered.
	Event *Event
	Zone  Zone
	Image Image
	Maps  Maps
	// TauE is the zone's K/S threshold: heat maps centre their scale on it.
	TauE float64
	// JPEG is set by the sink that renders the picture (alerts/snapshot);
	// sinks after it publish it.
	JPEG []byte
}
