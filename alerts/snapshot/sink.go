package snapshot

import (
	"bytes"
	"fmt"
	"log/slog"
	"sync"

	"github.com/didoedge/didoedge/alerts"
)

// PathOf is where the debug page serves the snapshot of an event id.
func PathOf(id string) string { return "/api/events/" + id + "/snapshot.jpg" }

// Sink renders the snapshots an engine asks for, keeps them in a Store
// and names them in their events (alerts.SnapshotSink). Put it before the
// transport sinks: they publish the JPEG it leaves in Snapshot.JPEG and
// deliver the event that names it. Events and states pass through
// untouched. It is safe for concurrent use (engines of several cameras).
type Sink struct {
	store   *Store
	quality int
	log     *slog.Logger

	mu  sync.Mutex
	buf bytes.Buffer
}

// NewSink renders at the JPEG quality (1..100) into store.
func NewSink(store *Store, quality int, log *slog.Logger) (*Sink, error) {
	if store == nil {
		return nil, fmt.Errorf("snapshot sink: no store")
	}
	if quality < 1 || quality > 100 {
		return nil, fmt.Errorf("snapshot sink: JPEG quality %d outside [1,100]", quality)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sink{store: store, quality: quality, log: log}, nil
}

// Store is the sink's store.
func (k *Sink) Store() *Store { return k.store }

// Event implements alerts.Sink; it does nothing.
func (k *Sink) Event(*alerts.Event) error { return nil }

// State implements alerts.Sink; it does nothing.
func (k *Sink) State(*alerts.State) error { return nil }

// Snapshot renders, stores and names the snapshot of s.Event.
func (k *Sink) Snapshot(s *alerts.Snapshot) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := Render(&k.buf, s, k.quality); err != nil {
		return err
	}
	jpeg := bytes.Clone(k.buf.Bytes()) // the transports keep it (retained)
	s.JPEG = jpeg
	if err := k.store.Put(s.Event.ID, jpeg); err != nil {
		k.log.Warn("snapshot not stored", "id", s.Event.ID, "err", err)
		return err
	}
	if s.Event.Snapshot != nil {
		s.Event.Snapshot.Path = PathOf(s.Event.ID)
	}
	return nil
}
