package broker

// Persistence of the embedded broker: a storage hook on bbolt (one file,
// pure Go, no cgo). It keeps what mochi needs to restore after a crash
// (sessions, subscriptions, queued and in-flight QoS 1/2 messages,
// retained messages), bounds the queued messages, and keeps their order.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/storage"
	"github.com/mochi-mqtt/server/v2/packets"
	"go.etcd.io/bbolt"

	"github.com/didoedge/didoedge/internal/lograte"
)

// StoreFile is the name of the store in StoreSettings.Dir.
const StoreFile = "broker.db"

// Defaults of the store's bound.
const (
	DefaultStoreMaxBytes    = 64 << 20
	DefaultStoreMaxMessages = 50000
)

// StoreSettings are the embedded broker's persistence settings (the YAML
// section `embedded.store`).
type StoreSettings struct {
	// Dir holds the store file (StoreFile). Empty: sessions, queued and
	// retained messages live in memory only and a crash loses them.
	Dir string `yaml:"dir"`
	// MaxBytes bounds the topic and payload bytes of the queued and
	// in-flight messages of all clients; MaxMessages their number. See
	// docs/alerts.md for what happens when the store is full.
	MaxBytes    int64 `yaml:"max_bytes"`
	MaxMessages int   `yaml:"max_messages"`
}

// SetDefaults fills in the bound's defaults.
func (s *StoreSettings) SetDefaults() {
	if s.MaxBytes == 0 {
		s.MaxBytes = DefaultStoreMaxBytes
	}
	if s.MaxMessages == 0 {
		s.MaxMessages = DefaultStoreMaxMessages
	}
}

// Validate checks the settings after SetDefaults; key is the settings'
// place in the config file (e.g. "embedded.store"), which errors name.
func (s StoreSettings) Validate(key string) error {
	if s.MaxBytes < 64<<10 {
		return fmt.Errorf("%s.max_bytes: %d below 65536", key, s.MaxBytes)
	}
	// mochi identifies a client's queued messages by 16-bit packet ids.
	if s.MaxMessages < 16 || s.MaxMessages > 65535 {
		return fmt.Errorf("%s.max_messages: %d outside [16, 65535] (a client's queue is bounded by its 65535 packet ids)", key, s.MaxMessages)
	}
	if s.Dir != "" {
		if fi, err := os.Stat(s.Dir); err == nil && !fi.IsDir() {
			return fmt.Errorf("%s.dir: %q is not a directory", key, s.Dir)
		}
	}
	return nil
}

// StoreStats are the store's counters since Start.
type StoreStats struct {
	Messages int   // queued and in-flight messages
	Bytes    int64 // their topic and payload bytes
	// DroppedUpdates counts queued messages dropped to make room, oldest
	// droppable first (Options.Droppable), and droppable messages not
	// queued because nothing older could be dropped.
	DroppedUpdates uint64
	// Refused counts messages that are not droppable (alert new, end,
	// fault events) and were not queued for a client because the store
	// was full of them: each is also logged at ERROR.
	Refused uint64
	// WriteErrors counts store writes that failed (the message stays in
	// memory; Broker.Publish reports it, so the outbox keeps the event).
	WriteErrors uint64
	// Damaged counts stores found damaged or emptied at start, moved
	// aside and replaced by a fresh one (0 or 1 per Start; what was lost
	// is in the ERROR line of that start).
	Damaged uint64
}

// Key prefixes in the store's one bucket.
const (
	keyClient   = "c:"
	keySub      = "s:"
	keyRetained = "r:"
	keyInflight = "i:" // + 8-byte big-endian order: keys sort in publish order
)

var bucketName = []byte("didoedge-broker")

// queued is one queued or in-flight message of a client.
type queued struct {
	ord       uint64 // publish order, unique in the store
	size      int64
	droppable bool
}

// storeHook persists the broker's state in bbolt. Every write is its own
// transaction, committed (fsynced) before the hook returns: the inline
// publish path (Broker.Publish) returns only after every subscriber's copy
// is on disk.
type storeHook struct {
	mqtt.HookBase
	set       StoreSettings
	droppable func(topic string, payload []byte) bool
	log       *slog.Logger
	rl        *lograte.Limiter
	db        *bbolt.DB
	clients   func(id string) (*mqtt.Client, bool)

	mu      sync.Mutex
	byCl    map[string]map[uint16]*queued
	nextOrd uint64
	count   int
	bytes   int64

	dropped, refused, writeErrs atomic.Uint64
	// damaged is 1 when the store was found damaged or empty at start
	// and replaced (StoreStats.Damaged).
	damaged atomic.Uint64
	stopped atomic.Bool

	// gate orders the runtime's inline publishes against a returning
	// client's session: a client's queued messages are renumbered and
	// resent (OnSessionEstablish .. OnSessionEstablished) with no inline
	// publish in between, so that no new message overtakes them.
	gate    sync.RWMutex
	estMu   sync.Mutex
	release func()
}

func openStore(set StoreSettings, droppable func(string, []byte) bool, log *slog.Logger) (*storeHook, error) {
	if err := os.MkdirAll(set.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("store dir: %w", err)
	}
	path := filepath.Join(set.Dir, StoreFile)
	// A damaged or emptied store is replaced by a fresh one (logged at
	// ERROR with what was lost, counted): the broker starts in every case
	// but a store another process holds.
	db, damaged, err := openStoreFile(path, log, time.Now())
	if err != nil {
		return nil, err
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketName)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	if droppable == nil {
		droppable = func(string, []byte) bool { return false }
	}
	h := &storeHook{set: set, droppable: droppable, log: log, rl: lograte.New(log, 0), db: db,
		byCl: map[string]map[uint16]*queued{}}
	if damaged {
		h.damaged.Store(1)
	}
	return h, nil
}

func (h *storeHook) ID() string { return "didoedge-store" }

func (h *storeHook) Provides(b byte) bool {
	return bytes.Contains([]byte{
		mqtt.OnSessionEstablish, mqtt.OnSessionEstablished, mqtt.OnDisconnect,
		mqtt.OnSubscribed, mqtt.OnUnsubscribed, mqtt.OnRetainMessage, mqtt.OnWillSent,
		mqtt.OnQosPublish, mqtt.OnQosComplete, mqtt.OnQosDropped,
		mqtt.OnClientExpired, mqtt.OnRetainedExpired,
		mqtt.StoredClients, mqtt.StoredSubscriptions, mqtt.StoredInflightMessages, mqtt.StoredRetainedMessages,
	}, []byte{b})
}

// Stop closes the store. mochi calls it before the clients it disconnects
// on Close have finished: their late writes are skipped (a clean
// session's state is not needed after a stop either).
func (h *storeHook) Stop() error {
	h.stopped.Store(true)
	return h.db.Close()
}

func (h *storeHook) stats() StoreStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return StoreStats{Messages: h.count, Bytes: h.bytes, DroppedUpdates: h.dropped.Load(),
		Refused: h.refused.Load(), WriteErrors: h.writeErrs.Load(), Damaged: h.damaged.Load()}
}

// update runs one committed transaction; a failure is counted and logged.
func (h *storeHook) update(what string, fn func(b *bbolt.Bucket) error) {
	err := h.db.Update(func(tx *bbolt.Tx) error { return fn(tx.Bucket(bucketName)) })
	if err != nil && h.stopped.Load() {
		return
	}
	if err != nil {
		n := h.writeErrs.Add(1)
		h.rl.Error("store write", "mqtt broker: store write failed; the broker's state is kept in memory only until a write succeeds",
			"what", what, "err", err, "write_errors_total", n)
	}
}

func put(b *bbolt.Bucket, key string, v storage.Serializable) error {
	data, err := v.MarshalBinary()
	if err != nil {
		return err
	}
	return b.Put([]byte(key), data)
}

func inflightKey(ord uint64) []byte {
	k := make([]byte, len(keyInflight)+8)
	copy(k, keyInflight)
	binary.BigEndian.PutUint64(k[len(keyInflight):], ord)
	return k
}

func subKey(client, filter string) string { return keySub + client + "\x00" + filter }

// OnSessionEstablish runs before mochi hands a returning client its
// session and resends its queued messages. mochi resends them sorted by
// uint16(Created), Created being a Unix time in seconds: messages queued
// within one second come out in map order (the issue saw 1, 3, 2, 4, 6,
// 5, ...), and the order wraps every 18 hours. So the queued messages get
// Created = their rank in publish order (1, 2, ...; at most 65535 of
// them, so the uint16 never wraps), which makes mochi's sort the publish
// order. Created serves nothing else here: the broker enforces no
// maximum message expiry (Start sets it to 0). The gate is held until
// OnSessionEstablished, so no inline publish lands between the resends.
func (h *storeHook) OnSessionEstablish(cl *mqtt.Client, _ packets.Packet) {
	h.gate.Lock()
	var once sync.Once
	rel := func() { once.Do(h.gate.Unlock) }
	// mochi returns without OnSessionEstablished when the CONNACK or a
	// resend cannot be written: the gate reopens on its own then.
	t := time.AfterFunc(5*time.Second, rel)
	h.estMu.Lock()
	h.release = func() { t.Stop(); rel() }
	h.estMu.Unlock()
	existing, ok := h.clients(cl.ID)
	if !ok || existing.State.Inflight.Len() == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	byID := h.byCl[cl.ID]
	pks := existing.State.Inflight.GetAll(false)
	sort.SliceStable(pks, func(i, j int) bool { return h.ordOf(byID, pks[i]) < h.ordOf(byID, pks[j]) })
	// mochi keeps the packet ids of both directions in one map: a
	// SUBSCRIBE (or UNSUBSCRIBE, or a QoS 2 PUBLISH) of the returning
	// client whose id is that of a queued message is refused with 0x91
	// (0x80 in MQTT 3.1.1), and clients number their packets from 1, as
	// the queue was. So the queued QoS 1 messages move to the top of the
	// id space (65535 down), apart from the ids a client starts with.
	// QoS 1 allows the new id: the client may see a message again (at
	// least once), never lose one. QoS 2 messages keep theirs (exactly
	// once hangs on the id).
	var moved []packets.Packet
	for _, pk := range pks {
		if pk.FixedHeader.Qos == 1 && pk.FixedHeader.Type == packets.Publish {
			existing.State.Inflight.Delete(pk.PacketID)
			moved = append(moved, pk)
		}
	}
	next := uint16(65535)
	rekeyed := make(map[uint16]*queued, len(byID))
	for id, q := range byID {
		rekeyed[id] = q
	}
	for _, pk := range moved {
		delete(rekeyed, pk.PacketID)
	}
	for i := range moved {
		for _, used := existing.State.Inflight.Get(next); used; _, used = existing.State.Inflight.Get(next) {
			next--
		}
		if q := byID[moved[i].PacketID]; q != nil {
			rekeyed[next] = q
		}
		moved[i].PacketID = next
		existing.State.Inflight.Set(moved[i])
		next--
	}
	if byID != nil {
		h.byCl[cl.ID] = rekeyed
	}
	pks = existing.State.Inflight.GetAll(false)
	sort.SliceStable(pks, func(i, j int) bool { return h.ordOf(rekeyed, pks[i]) < h.ordOf(rekeyed, pks[j]) })
	for i, pk := range pks {
		pk.Created = int64(i + 1)
		existing.State.Inflight.Set(pk)
	}
}

// ordOf is a message's publish order; messages the store does not know
// (it was off when they were queued) sort first, in id order.
func (h *storeHook) ordOf(byID map[uint16]*queued, pk packets.Packet) uint64 {
	if q := byID[pk.PacketID]; q != nil {
		return q.ord
	}
	return 0
}

func (h *storeHook) OnSessionEstablished(cl *mqtt.Client, _ packets.Packet) {
	h.estMu.Lock()
	rel := h.release
	h.release = nil
	h.estMu.Unlock()
	if rel != nil {
		rel()
	}
	h.writeClient(cl)
}

// publishGate is held by Broker.Publish around an inline publish.
func (h *storeHook) publishGate() func() {
	h.gate.RLock()
	return h.gate.RUnlock
}

func (h *storeHook) OnWillSent(cl *mqtt.Client, _ packets.Packet) { h.writeClient(cl) }

func (h *storeHook) writeClient(cl *mqtt.Client) {
	props := cl.Properties.Props.Copy(false)
	in := &storage.Client{
		ID: cl.ID, T: storage.ClientKey, Remote: cl.Net.Remote, Listener: cl.Net.Listener,
		Username: cl.Properties.Username, Clean: cl.Properties.Clean, ProtocolVersion: cl.Properties.ProtocolVersion,
		Properties: storage.ClientProperties{
			SessionExpiryInterval: props.SessionExpiryInterval, SessionExpiryIntervalFlag: props.SessionExpiryIntervalFlag,
			AuthenticationMethod: props.AuthenticationMethod, AuthenticationData: props.AuthenticationData,
			RequestProblemInfo: props.RequestProblemInfo, RequestProblemInfoFlag: props.RequestProblemInfoFlag,
			RequestResponseInfo: props.RequestResponseInfo, ReceiveMaximum: props.ReceiveMaximum,
			TopicAliasMaximum: props.TopicAliasMaximum, User: props.User, MaximumPacketSize: props.MaximumPacketSize,
		},
		Will: storage.ClientWill(cl.Properties.Will),
	}
	h.update("client", func(b *bbolt.Bucket) error { return put(b, keyClient+cl.ID, in) })
}

// OnDisconnect forgets a client whose session ends with the connection
// (clean session): its subscriptions and queued messages go with it.
func (h *storeHook) OnDisconnect(cl *mqtt.Client, _ error, expire bool) {
	if !expire || cl.StopCause() == packets.ErrSessionTakenOver {
		return
	}
	h.forget(cl.ID)
}

func (h *storeHook) OnClientExpired(cl *mqtt.Client) { h.forget(cl.ID) }

func (h *storeHook) forget(id string) {
	h.mu.Lock()
	var keys [][]byte
	for _, q := range h.byCl[id] {
		keys = append(keys, inflightKey(q.ord))
		h.count--
		h.bytes -= q.size
	}
	delete(h.byCl, id)
	h.mu.Unlock()
	h.update("forget client", func(b *bbolt.Bucket) error {
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		c := b.Cursor()
		prefix := []byte(keySub + id + "\x00")
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return b.Delete([]byte(keyClient + id))
	})
}

func (h *storeHook) OnSubscribed(cl *mqtt.Client, pk packets.Packet, codes []byte) {
	h.update("subscription", func(b *bbolt.Bucket) error {
		for i, f := range pk.Filters {
			if i >= len(codes) || codes[i] >= 0x80 { // refused
				continue
			}
			in := &storage.Subscription{ID: subKey(cl.ID, f.Filter), T: storage.SubscriptionKey, Client: cl.ID,
				Qos: codes[i], Filter: f.Filter, Identifier: f.Identifier, NoLocal: f.NoLocal,
				RetainHandling: f.RetainHandling, RetainAsPublished: f.RetainAsPublished}
			if err := put(b, in.ID, in); err != nil {
				return err
			}
		}
		return nil
	})
}

func (h *storeHook) OnUnsubscribed(cl *mqtt.Client, pk packets.Packet) {
	h.update("unsubscription", func(b *bbolt.Bucket) error {
		for _, f := range pk.Filters {
			if err := b.Delete([]byte(subKey(cl.ID, f.Filter))); err != nil {
				return err
			}
		}
		return nil
	})
}

func (h *storeHook) OnRetainMessage(cl *mqtt.Client, pk packets.Packet, r int64) {
	if r == -1 {
		h.update("retained", func(b *bbolt.Bucket) error { return b.Delete([]byte(keyRetained + pk.TopicName)) })
		return
	}
	in := message(pk)
	in.ID, in.T, in.Client = keyRetained+pk.TopicName, storage.RetainedKey, cl.ID
	h.update("retained", func(b *bbolt.Bucket) error { return put(b, in.ID, in) })
}

func (h *storeHook) OnRetainedExpired(topic string) {
	h.update("retained", func(b *bbolt.Bucket) error { return b.Delete([]byte(keyRetained + topic)) })
}

func message(pk packets.Packet) *storage.Message {
	p := pk.Properties.Copy(false)
	return &storage.Message{
		Origin: pk.Origin, FixedHeader: pk.FixedHeader, TopicName: pk.TopicName, Payload: pk.Payload,
		Created: pk.Created, PacketID: pk.PacketID,
		Properties: storage.MessageProperties{PayloadFormat: p.PayloadFormat, PayloadFormatFlag: p.PayloadFormatFlag,
			MessageExpiryInterval: p.MessageExpiryInterval, ContentType: p.ContentType, ResponseTopic: p.ResponseTopic,
			CorrelationData: p.CorrelationData, SubscriptionIdentifier: p.SubscriptionIdentifier,
			TopicAlias: p.TopicAlias, User: p.User},
	}
}

// OnQosPublish stores a message queued (or sent and awaiting its
// acknowledgement) for a client, in the same transaction as the messages
// dropped to make room for it. A resend of a stored message is not
// written again.
//
// When full (MaxMessages or MaxBytes), room is made by dropping the
// client's oldest droppable messages (alert updates and zone states,
// which a later one supersedes; Options.Droppable). If that is not
// enough, the new message is not queued for this client: counted as a
// dropped update when it is droppable itself, else counted as refused and
// logged at ERROR (rate-limited) with its topic: never silently.
func (h *storeHook) OnQosPublish(cl *mqtt.Client, pk packets.Packet, _ int64, _ int) {
	size := int64(len(pk.TopicName) + len(pk.Payload))
	h.mu.Lock()
	byID := h.byCl[cl.ID]
	if byID == nil {
		byID = map[uint16]*queued{}
		h.byCl[cl.ID] = byID
	}
	if byID[pk.PacketID] != nil {
		h.mu.Unlock()
		return
	}
	full := func() bool { return h.count+1 > h.set.MaxMessages || h.bytes+size > h.set.MaxBytes }
	var evicted []uint16
	var evictedKeys [][]byte
	for full() {
		var oldest uint16
		var o *queued
		for id, q := range byID {
			if q.droppable && (o == nil || q.ord < o.ord) {
				oldest, o = id, q
			}
		}
		if o == nil {
			break
		}
		delete(byID, oldest)
		h.count--
		h.bytes -= o.size
		evicted = append(evicted, oldest)
		evictedKeys = append(evictedKeys, inflightKey(o.ord))
	}
	drop := h.droppable(pk.TopicName, pk.Payload)
	keep := !full()
	var ord uint64
	if keep {
		h.nextOrd++
		ord = h.nextOrd
		byID[pk.PacketID] = &queued{ord: ord, size: size, droppable: drop}
		h.count++
		h.bytes += size
	}
	count, bytes := h.count, h.bytes
	h.mu.Unlock()

	for _, id := range evicted {
		cl.State.Inflight.Delete(id)
	}
	if n := len(evicted); n > 0 {
		total := h.dropped.Add(uint64(n))
		h.rl.Warn("store full: dropped", "mqtt broker: store full: dropped the oldest queued updates to make room",
			"client_id", cl.ID, "dropped", n, "dropped_total", total)
	}
	if !keep {
		cl.State.Inflight.Delete(pk.PacketID)
		if drop {
			h.dropped.Add(1)
		} else {
			total := h.refused.Add(1)
			h.rl.Error("store full: refused", "mqtt broker: store full of events that are never dropped: a message was NOT queued for this client",
				"client_id", cl.ID, "topic", pk.TopicName, "messages", count, "bytes", bytes, "refused_total", total)
		}
	}
	if !keep && len(evictedKeys) == 0 {
		return
	}
	in := message(pk)
	in.T, in.Client, in.Sent = storage.InflightKey, cl.ID, time.Now().Unix()
	h.update("queued message", func(b *bbolt.Bucket) error {
		for _, k := range evictedKeys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		if !keep {
			return nil
		}
		return put(b, string(inflightKey(ord)), in)
	})
}

// OnQosComplete removes a message its client acknowledged.
func (h *storeHook) OnQosComplete(cl *mqtt.Client, pk packets.Packet) { h.remove(cl.ID, pk.PacketID) }

// OnQosDropped removes a message mochi dropped (expired, a clean
// session). mochi also "drops" the messages of a session taken over by a
// returning client after copying them to the new connection: those stay.
func (h *storeHook) OnQosDropped(cl *mqtt.Client, pk packets.Packet) {
	if cl.IsTakenOver() {
		return
	}
	h.remove(cl.ID, pk.PacketID)
}

func (h *storeHook) remove(client string, id uint16) {
	h.mu.Lock()
	q := h.byCl[client][id]
	if q != nil {
		delete(h.byCl[client], id)
		h.count--
		h.bytes -= q.size
	}
	h.mu.Unlock()
	if q == nil {
		return
	}
	h.update("acknowledged message", func(b *bbolt.Bucket) error { return b.Delete(inflightKey(q.ord)) })
}

// iter calls fn with every value under prefix.
func (h *storeHook) iter(prefix string, fn func(k, v []byte) error) error {
	return h.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketName).Cursor()
		for k, v := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
			if err := fn(k, v); err != nil {
				return fmt.Errorf("store key %q: %w", k, err)
			}
		}
		return nil
	})
}

func (h *storeHook) StoredClients() ([]storage.Client, error) {
	var out []storage.Client
	err := h.iter(keyClient, func(_, v []byte) error {
		var c storage.Client
		if err := c.UnmarshalBinary(v); err != nil {
			return err
		}
		out = append(out, c)
		return nil
	})
	return out, err
}

func (h *storeHook) StoredSubscriptions() ([]storage.Subscription, error) {
	var out []storage.Subscription
	err := h.iter(keySub, func(_, v []byte) error {
		var s storage.Subscription
		if err := s.UnmarshalBinary(v); err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

func (h *storeHook) StoredRetainedMessages() ([]storage.Message, error) {
	var out []storage.Message
	err := h.iter(keyRetained, func(_, v []byte) error {
		var m storage.Message
		if err := m.UnmarshalBinary(v); err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	return out, err
}

// StoredInflightMessages returns the queued messages in publish order and
// rebuilds the index (order, size, droppable) that the bound and the
// resend order use.
func (h *storeHook) StoredInflightMessages() ([]storage.Message, error) {
	var out []storage.Message
	h.mu.Lock()
	defer h.mu.Unlock()
	err := h.iter(keyInflight, func(k, v []byte) error {
		if len(k) != len(keyInflight)+8 {
			return errors.New("malformed key")
		}
		var m storage.Message
		if err := m.UnmarshalBinary(v); err != nil {
			return err
		}
		ord := binary.BigEndian.Uint64(k[len(keyInflight):])
		byID := h.byCl[m.Client]
		if byID == nil {
			byID = map[uint16]*queued{}
			h.byCl[m.Client] = byID
		}
		size := int64(len(m.TopicName) + len(m.Payload))
		byID[m.PacketID] = &queued{ord: ord, size: size, droppable: h.droppable(m.TopicName, m.Payload)}
		h.count++
		h.bytes += size
		h.nextOrd = max(h.nextOrd, ord)
		out = append(out, m)
		return nil
	})
	return out, err
}
