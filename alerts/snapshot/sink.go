package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/didoedge/didoedge/alerts"
)

// PathOf is where the debug page serves the snapshot of an event id.
func PathOf(id string) string { return "/api/events/" + id + "/snapshot.jpg" }

// queueLen bounds the snapshots waiting to be rendered; beyond it a
// snapshot is skipped (its event does not name one).
const queueLen = 8

// Sink takes the snapshots an engine asks for (alerts.SnapshotSink). It
// copies the frame and the epistemic map and returns at once, so that the
// event goes out without waiting for the picture; a worker goroutine
// renders the JPEG, keeps it in the Store and hands it to Next (the MQTT
// service publishes it retained). The event names the snapshot (its path
// on the debug page) only when it was queued. Events and states pass
// through untouched. It is safe for concurrent use (engines of several
// cameras); Close drains the queue.
type Sink struct {
	store   *Store
	quality int
	log     *slog.Logger
	next    alerts.SnapshotSink

	jobs    chan *job
	free    chan *job
	done    chan struct{}
	closed  atomic.Bool
	mu      sync.Mutex // serializes Snapshot's enqueue with Close
	skipped atomic.Uint64
	failed  atomic.Uint64
}

// job is one snapshot's copy of the frame.
type job struct {
	ev   alerts.Event
	snap alerts.Snapshot
	rgb  []uint8
	epi  []float32
}

// NewSink renders at the JPEG quality (1..100) into store and hands every
// rendered snapshot to next (may be nil).
func NewSink(store *Store, quality int, log *slog.Logger, next alerts.SnapshotSink) (*Sink, error) {
	if store == nil {
		return nil, fmt.Errorf("snapshot sink: no store")
	}
	if quality < 1 || quality > 100 {
		return nil, fmt.Errorf("snapshot sink: JPEG quality %d outside [1,100]", quality)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	k := &Sink{store: store, quality: quality, log: log, next: next,
		jobs: make(chan *job, queueLen), free: make(chan *job, queueLen), done: make(chan struct{})}
	for range queueLen {
		k.free <- &job{}
	}
	go k.work()
	return k, nil
}

// Store is the sink's store.
func (k *Sink) Store() *Store { return k.store }

// Skipped counts snapshots not taken because the queue was full or the
// sink closed; Failed those that could not be rendered or stored.
func (k *Sink) Skipped() uint64 { return k.skipped.Load() }

// Failed counts snapshots that could not be rendered or stored.
func (k *Sink) Failed() uint64 { return k.failed.Load() }

// Event implements alerts.Sink; it does nothing.
func (k *Sink) Event(*alerts.Event) error { return nil }

// State implements alerts.Sink; it does nothing.
func (k *Sink) State(*alerts.State) error { return nil }

// Snapshot queues the snapshot of s.Event and names it in the event.
func (k *Sink) Snapshot(s *alerts.Snapshot) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed.Load() {
		k.skipped.Add(1)
		return errors.New("snapshot sink: closed")
	}
	var j *job
	select {
	case j = <-k.free:
	default:
		k.skipped.Add(1)
		k.log.Warn("snapshot skipped: the renderer is behind", "id", s.Event.ID)
		return nil
	}
	j.ev = *s.Event
	j.snap = *s
	j.snap.Event = &j.ev
	j.rgb = append(j.rgb[:0], s.Image.RGB...)
	j.epi = append(j.epi[:0], s.Maps.Epistemic...)
	j.snap.Image.RGB = j.rgb
	j.snap.Maps = alerts.Maps{Width: s.Maps.Width, Height: s.Maps.Height, Epistemic: j.epi}
	j.snap.JPEG = nil
	if s.Event.Snapshot != nil {
		s.Event.Snapshot.Path = PathOf(s.Event.ID)
	}
	k.jobs <- j // never blocks: at most queueLen jobs exist
	return nil
}

// work renders, stores and forwards the queued snapshots.
func (k *Sink) work() {
	defer close(k.done)
	var buf bytes.Buffer
	for j := range k.jobs {
		if err := k.render(&buf, j); err != nil {
			k.failed.Add(1)
			k.log.Warn("snapshot failed", "id", j.ev.ID, "err", err)
		}
		k.free <- j
	}
}

func (k *Sink) render(buf *bytes.Buffer, j *job) error {
	if err := Render(buf, &j.snap, k.quality); err != nil {
		return err
	}
	jpeg := bytes.Clone(buf.Bytes()) // the transports keep it (retained)
	if err := k.store.Put(j.ev.ID, jpeg); err != nil {
		return err
	}
	if k.next == nil {
		return nil
	}
	j.snap.JPEG = jpeg
	return k.next.Snapshot(&j.snap)
}

// Close renders what is queued, then stops the worker. Later snapshots
// are skipped.
func (k *Sink) Close() {
	k.mu.Lock()
	if k.closed.Swap(true) {
		k.mu.Unlock()
		<-k.done
		return
	}
	close(k.jobs)
	k.mu.Unlock()
	<-k.done
}

// SinkName names the sink in errors and logs (alerts.SinkError): the snapshot renderer.
func (s *Sink) SinkName() string { return "snapshots" }
