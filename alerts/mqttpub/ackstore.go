package mqttpub

import (
	"strings"
	"sync"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// ackStore is paho's ordered memory store with one addition: it reports
// the outbox seq of every publish the broker acknowledged. Paho deletes an
// outbound publish from its store exactly when its PUBACK arrives, and
// keeps the same packet (and payload slice) across resends, so the
// payload's address identifies the record.
type ackStore struct {
	*mqtt.OrderedMemoryStore
	mu    sync.Mutex
	seqs  map[*byte]uint64
	acked []uint64
	acks  chan struct{} // signalled when acked grows
}

func newAckStore() *ackStore {
	return &ackStore{OrderedMemoryStore: mqtt.NewOrderedMemoryStore(), seqs: map[*byte]uint64{}, acks: make(chan struct{}, 1)}
}

// track registers the seq of a payload about to be published.
func (s *ackStore) track(payload []byte, seq uint64) {
	if len(payload) == 0 {
		return
	}
	s.mu.Lock()
	s.seqs[&payload[0]] = seq
	s.mu.Unlock()
}

// takeAcked returns and forgets the seqs acknowledged since the last call.
func (s *ackStore) takeAcked() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.acked
	s.acked = nil
	return out
}

// Del is called by paho for an outbound key when the PUBACK arrives.
func (s *ackStore) Del(key string) {
	if strings.HasPrefix(key, "o.") {
		if pk, ok := s.OrderedMemoryStore.Get(key).(*packets.PublishPacket); ok && len(pk.Payload) > 0 {
			s.mu.Lock()
			if seq, ok := s.seqs[&pk.Payload[0]]; ok {
				delete(s.seqs, &pk.Payload[0])
				s.acked = append(s.acked, seq)
				select {
				case s.acks <- struct{}{}:
				default:
				}
			}
			s.mu.Unlock()
		}
	}
	s.OrderedMemoryStore.Del(key)
}
