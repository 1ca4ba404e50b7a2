package mqttpub

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/outbox"
	"github.com/didoedge/didoedge/internal/lograte"
	"github.com/didoedge/didoedge/internal/redact"
)

// Availability payloads (bare words, retained).
const (
	Online  = "online"
	Offline = "offline"
)

// Options configure a Publisher.
type Options struct {
	// Broker is the broker URL, e.g. tcp://127.0.0.1:1883 or ssl://host:8883.
	Broker string
	// ClientID must be stable across restarts: the broker keeps the
	// session (CleanSession false) under it.
	ClientID           string
	Username, Password string
	TLS                *tls.Config
	Topics             alerts.Topics
	// StatsQoS is the QoS of stats (0 or 1). Events are always QoS 1.
	StatsQoS  byte
	KeepAlive time.Duration
	// InFlight is the number of events awaiting PUBACK at once.
	InFlight int
	// RetryInterval is the connect retry interval.
	RetryInterval time.Duration
	// InProcess, when set, is a broker in this process (the embedded
	// broker): everything is published through it, not over TCP, and an
	// event is acknowledged in the outbox once InProcess.Publish returned
	// (the broker's store has every subscriber's copy then). Broker only
	// names it in logs.
	InProcess InProcess
	Logger    *slog.Logger
}

// InProcess is a broker in the publisher's process (*broker.Broker).
type InProcess interface {
	Publish(topic string, payload []byte, retain bool, qos byte) error
	Subscribe(filter string, fn func(topic string, payload []byte)) error
}

// Publisher sends outbox records and state over one MQTT connection.
type Publisher struct {
	opts   Options
	box    *outbox.Outbox
	client mqtt.Client
	log    *slog.Logger
	rl     *lograte.Limiter // repeated conditions: one line per interval

	mu       sync.Mutex
	retained map[string][]byte // latest retained payload by topic: states, snapshots, discovery
	toSend   []retainedMsg     // retained payloads set since run last published, in order
	sending  []retainedMsg     // the list publishRetained is sending (run's goroutine only)
	setReady chan struct{}     // a retained payload was set
	subs     map[string]mqtt.MessageHandler
	closed   bool

	store *ackStore
	// epoch counts connection attempts; see run for why.
	epoch     atomic.Uint64
	published atomic.Uint64
	notQueued atomic.Uint64
	kept      atomic.Int64 // events left in the outbox by Close
	stop      chan struct{}
	done      chan struct{}
}

// Open starts a publisher on the outbox. It does not wait for the broker:
// events are queued durably and sent once a connection exists.
func Open(opts Options, box *outbox.Outbox) (*Publisher, error) {
	if opts.Broker == "" || opts.ClientID == "" {
		return nil, errors.New("open publisher: broker and client id are required")
	}
	if redact.HasUserInfo(opts.Broker) {
		return nil, fmt.Errorf("open publisher: broker URL %q carries credentials; give them as Username and Password", redact.URL(opts.Broker))
	}
	if opts.StatsQoS > 1 {
		return nil, fmt.Errorf("open publisher: stats qos %d, want 0 or 1", opts.StatsQoS)
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = 10 * time.Second
	}
	if opts.InFlight <= 0 {
		opts.InFlight = 16
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	log := opts.Logger.With("mqtt", opts.Broker, "client_id", opts.ClientID)
	p := &Publisher{opts: opts, box: box, log: log, rl: lograte.New(log, 0),
		retained: map[string][]byte{}, setReady: make(chan struct{}, 1),
		subs: map[string]mqtt.MessageHandler{}, stop: make(chan struct{}), done: make(chan struct{})}
	p.store = newAckStore()
	avail := opts.Topics.Availability()
	if opts.InProcess != nil {
		p.send(avail, 1, true, []byte(Online))
		go p.runInProcess()
		return p, nil
	}
	co := mqtt.NewClientOptions().
		AddBroker(opts.Broker).
		SetClientID(opts.ClientID).
		// CleanSession false: the broker keeps our session, and paho does
		// not wipe its store on the first connect.
		SetCleanSession(false).
		// The ordered store resends in publish order after a reconnect; the
		// wrapper tells us about PUBACKs.
		SetStore(p.store).
		SetAutoReconnect(true).
		SetConnectRetry(true).
		SetConnectRetryInterval(opts.RetryInterval).
		SetMaxReconnectInterval(max(opts.RetryInterval, 2*time.Second)).
		SetConnectTimeout(5*time.Second).
		SetWriteTimeout(5*time.Second).
		SetKeepAlive(opts.KeepAlive).
		SetResumeSubs(false).
		SetWill(avail, Offline, 1, true).
		SetConnectionAttemptHandler(func(_ *url.URL, c *tls.Config) *tls.Config {
			p.epoch.Add(1) // runs before the attempt, so before the connection is up
			return c
		}).
		SetOnConnectHandler(func(c mqtt.Client) {
			// Handlers must not block on tokens: publish and return.
			p.log.Info("mqtt connected")
			c.Publish(avail, 1, true, Online)
			p.mu.Lock()
			for topic, payload := range p.retained {
				c.Publish(topic, 1, true, payload)
			}
			for topic, h := range p.subs {
				c.Subscribe(topic, 1, h)
			}
			p.mu.Unlock()
		}).
		SetConnectionLostHandler(func(_ mqtt.Client, err error) {
			p.rl.Warn("connection lost", "mqtt connection lost; reconnecting (events stay queued in the outbox)", "err", err)
		})
	if opts.Username != "" {
		co.SetUsername(opts.Username).SetPassword(opts.Password)
	}
	if opts.TLS != nil {
		co.SetTLSConfig(opts.TLS)
	}
	p.client = mqtt.NewClient(co)
	p.client.Connect() // retries in the background (SetConnectRetry)
	go p.run()
	return p, nil
}

// Emit queues an event durably: it assigns the event's Seq, stores it and
// returns once it is on disk. Delivery happens in the background.
//
// When the event cannot be queued (outbox full, disk full), Emit returns
// the error with ev.Seq set to 0: the seq it was offered belongs to no
// stored event and will be given to the next one, so it must never be
// shown with this event. Failures are logged here, one line per condition
// per interval with a count, and counted (NotQueued).
func (p *Publisher) Emit(ev *alerts.Event) (uint64, error) {
	topic := p.opts.Topics.Events(ev.Camera)
	seq, err := p.box.Append(func(seq uint64) (outbox.Record, error) {
		ev.Seq = seq
		payload, err := json.Marshal(ev)
		if err != nil {
			return outbox.Record{}, err
		}
		return outbox.Record{Topic: topic, QoS: 1, Droppable: ev.Droppable(), Payload: payload}, nil
	})
	if err != nil {
		ev.Seq = 0
		n := p.notQueued.Add(1)
		key := "not queued"
		if errors.Is(err, outbox.ErrNotWritable) {
			key = "not queued: not writable"
		}
		p.rl.Error(key, "alert event NOT queued: it will not be delivered", "id", ev.ID, "type", ev.Type,
			"not_queued_total", n, "err", err)
		return 0, fmt.Errorf("emit %s event %s: %w", ev.Type, ev.ID, err)
	}
	return seq, nil
}

// EmitBatch queues events all or nothing (a reload's end events of every
// camera): they get consecutive seqs and are stored with one fsync, or,
// when they cannot all be stored (outbox full, disk full), none is, every
// Seq stays 0 and the error says why. Unlike Emit, a refused batch is not
// counted as not queued: the caller keeps the state the events were to
// end (the reload is refused) and nothing is lost.
func (p *Publisher) EmitBatch(evs []*alerts.Event) error {
	if len(evs) == 0 {
		return nil
	}
	_, err := p.box.AppendBatch(len(evs), func(i int, seq uint64) (outbox.Record, error) {
		ev := evs[i]
		ev.Seq = seq
		payload, err := json.Marshal(ev)
		if err != nil {
			return outbox.Record{}, err
		}
		return outbox.Record{Topic: p.opts.Topics.Events(ev.Camera), QoS: 1, Droppable: ev.Droppable(), Payload: payload}, nil
	})
	if err != nil {
		for _, ev := range evs {
			ev.Seq = 0
		}
		return fmt.Errorf("emit %d events (%s %s first): %w", len(evs), evs[0].Type, evs[0].ID, err)
	}
	return nil
}

// NotQueued counts the events Emit could not queue since Open.
func (p *Publisher) NotQueued() uint64 { return p.notQueued.Load() }

// OutboxStats returns the outbox's counters.
func (p *Publisher) OutboxStats() outbox.Stats { return p.box.Stats() }

// OutboxWritable returns nil while the outbox can store new events, else
// the error of its last write.
func (p *Publisher) OutboxWritable() error { return p.box.Writable() }

// SetState records a zone's retained state and publishes it when
// connected; every connect republishes the latest state of every zone.
func (p *Publisher) SetState(s *alerts.State) error {
	payload, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("state of zone %s: %w", s.Zone, err)
	}
	p.SetRetained(p.opts.Topics.ZoneState(s.Camera, s.Zone), payload)
	return nil
}

// SetRetained records the latest retained payload of a topic (QoS 1); the
// publisher's goroutine publishes it when connected, after the events
// queued before it, and every connect republishes them all. An empty
// payload clears the broker's retained message. Retained messages are
// state, not events: they skip the outbox, and only the latest per topic
// matters. The caller (the frame's goroutine) does not wait for paho:
// an event's zone state, set right after the event, no longer reaches
// paho ahead of the event nor sits on the frame's path.
func (p *Publisher) SetRetained(topic string, payload []byte) {
	p.mu.Lock()
	p.retained[topic] = payload
	p.toSend = append(p.toSend, retainedMsg{topic, payload})
	p.mu.Unlock()
	select {
	case p.setReady <- struct{}{}:
	default:
	}
}

// ClearRetained clears every retained payload this publisher set on a
// topic that starts with prefix (a camera removed at run time: its zone
// states and snapshots): each gets an empty retained payload, which makes
// the broker drop its retained message, and later connects publish the
// empty payload again (a broker that kept the old one across a restart
// drops it then). It returns the topics cleared, sorted.
func (p *Publisher) ClearRetained(prefix string) []string {
	p.mu.Lock()
	var topics []string
	for topic, payload := range p.retained {
		if strings.HasPrefix(topic, prefix) && len(payload) > 0 {
			topics = append(topics, topic)
		}
	}
	slices.Sort(topics)
	for _, topic := range topics {
		p.retained[topic] = nil
		p.toSend = append(p.toSend, retainedMsg{topic, nil})
	}
	p.mu.Unlock()
	select {
	case p.setReady <- struct{}{}:
	default:
	}
	return topics
}

// retainedMsg is one retained payload to publish.
type retainedMsg struct {
	topic   string
	payload []byte
}

// connected reports whether the broker can be reached.
func (p *Publisher) connected() bool {
	return p.opts.InProcess != nil || p.client.IsConnectionOpen()
}

// send publishes a message that is not an outbox record (retained
// payloads, stats, availability): paho's token is not waited for; an
// in-process failure is logged.
func (p *Publisher) send(topic string, qos byte, retain bool, payload []byte) {
	if p.opts.InProcess == nil {
		p.client.Publish(topic, qos, retain, payload)
		return
	}
	if err := p.opts.InProcess.Publish(topic, payload, retain, qos); err != nil {
		p.rl.Warn("publish "+topic, "in-process publish failed", "topic", topic, "err", err)
	}
}

// publishRetained publishes the retained payloads set since the last
// call, each one, in the order they were set. While disconnected it
// drops them: the next connect republishes the latest of every topic.
// The list is swapped out under the lock and published outside it, so
// that SetRetained (the frame's goroutine) never waits on paho.
// Only run, and Close after run ended, call it.
func (p *Publisher) publishRetained() {
	p.mu.Lock()
	p.toSend, p.sending = p.sending[:0], p.toSend
	p.mu.Unlock()
	if p.connected() {
		for _, m := range p.sending {
			p.send(m.topic, 1, true, m.payload)
		}
	}
	clear(p.sending) // no payload kept alive
}

// RepublishRetained publishes every retained payload again (for a
// subscriber that restarted without a persistent session, e.g. Home
// Assistant's birth message).
func (p *Publisher) RepublishRetained() {
	if !p.connected() {
		return // the next connect republishes them
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for topic, payload := range p.retained {
		p.send(topic, 1, true, payload)
	}
}

// Subscribe has fn called with every message on topic (QoS 1); the
// subscription is renewed on every connect. fn runs on paho's goroutine:
// it must not block or wait on a token.
func (p *Publisher) Subscribe(topic string, fn func(payload []byte)) {
	if p.opts.InProcess != nil {
		if err := p.opts.InProcess.Subscribe(topic, func(_ string, payload []byte) { fn(payload) }); err != nil {
			p.log.Error("subscribe", "topic", topic, "err", err)
		}
		return
	}
	p.subscribe(topic, messageHandler(fn))
}

// subscribe keeps a paho subscription, renewed on every connect.
func (p *Publisher) subscribe(topic string, h mqtt.MessageHandler) {
	p.mu.Lock()
	p.subs[topic] = h
	p.mu.Unlock()
	if p.client.IsConnectionOpen() {
		p.client.Subscribe(topic, 1, h)
	}
}

// SubscribeMessages subscribes fn to a topic filter of the external
// broker (QoS 1, renewed on every connect) with each message's topic and
// retain flag; fn runs on paho's goroutine and must not block.
func (p *Publisher) SubscribeMessages(filter string, fn func(topic string, payload []byte, retained bool)) {
	p.subscribe(filter, func(_ mqtt.Client, m mqtt.Message) { fn(m.Topic(), m.Payload(), m.Retained()) })
}

// PublishMessage publishes a message that is neither an event nor a
// state (a control result): QoS 1, not retained, not queued; while
// disconnected it is lost.
func (p *Publisher) PublishMessage(topic string, payload []byte) {
	if p.connected() {
		p.send(topic, 1, false, payload)
	}
}

func messageHandler(fn func([]byte)) mqtt.MessageHandler {
	return func(_ mqtt.Client, m mqtt.Message) { fn(m.Payload()) }
}

// PublishStats fills in the connection and outbox figures and publishes
// s with the stats QoS. Stats are not queued: QoS 0 stats are lost while
// disconnected, by design.
func (p *Publisher) PublishStats(s *alerts.Stats) error {
	s.Connected = p.connected()
	st := p.box.Stats()
	s.Outbox = alerts.OutboxStats{Pending: st.Pending, PendingBytes: st.PendingBytes,
		Published: p.published.Load(), DroppedUpdates: st.DroppedUpdates, Refused: st.Refused}
	payload, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	if s.Connected {
		p.send(p.opts.Topics.Stats(s.Camera), p.opts.StatsQoS, false, payload)
	}
	return nil
}

// Connected reports whether the connection is up.
func (p *Publisher) Connected() bool { return p.connected() }

// Published counts events acknowledged by the broker since Open.
func (p *Publisher) Published() uint64 { return p.published.Load() }

type flight struct {
	seq      uint64
	epoch    uint64
	tok      mqtt.Token
	reported bool // a failed token was logged
}

// run publishes pending records in order, at most InFlight awaiting
// PUBACK, and acknowledges them in the outbox in order.
//
// Two paho behaviours shape it. First, after a reconnect paho resends the
// unacknowledged publishes from its store (in order: ordered store) and
// completes their original tokens without error before any PUBACK, so a
// token says nothing about delivery: acknowledgements come from the store
// (ackStore), which paho empties on PUBACK. Second, that resend runs while
// the new connection already accepts publishes, so a new publish could
// overtake a resent one. Hence: records are published only while
// connected, each is tagged with the connection-attempt epoch read before
// the connectivity check, and no new record is published while any record
// from an earlier epoch is unacknowledged.
func (p *Publisher) run() {
	defer close(p.done)
	var (
		cursor   uint64 // last seq handed to paho
		inflight []flight
		recs     []outbox.Record
		acked    = map[uint64]bool{}
	)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var lastProbe time.Time
	for {
		for _, seq := range p.store.takeAcked() {
			acked[seq] = true
		}
		n := 0
		for n < len(inflight) && acked[inflight[n].seq] {
			delete(acked, inflight[n].seq)
			n++
		}
		if n > 0 {
			if err := p.box.Ack(inflight[n-1].seq); err != nil {
				p.log.Error("outbox ack", "seq", inflight[n-1].seq, "err", err)
			}
			p.published.Add(uint64(n))
			inflight = append(inflight[:0], inflight[n:]...)
		}
		ep := p.epoch.Load()
		if len(inflight) < p.opts.InFlight && p.client.IsConnectionOpen() &&
			(len(inflight) == 0 || inflight[0].epoch == ep) {
			recs = p.box.Pending(cursor, p.opts.InFlight-len(inflight), recs[:0])
			for _, r := range recs {
				p.store.track(r.Payload, r.Seq)
				tok := p.client.Publish(r.Topic, r.QoS, r.Retain, r.Payload)
				inflight = append(inflight, flight{seq: r.Seq, epoch: ep, tok: tok})
				cursor = r.Seq
			}
		}
		for i := range inflight {
			f := &inflight[i]
			if f.reported {
				continue
			}
			select {
			case <-f.tok.Done():
				if err := f.tok.Error(); err != nil {
					// The packet stays in paho's store and is resent after
					// the next reconnect.
					f.reported = true
					p.rl.Warn("publish failed", "publish failed; the event stays queued and is resent after the next reconnect",
						"seq", f.seq, "err", err)
				}
			default:
			}
		}
		p.publishRetained()
		// While the outbox cannot write (disk full), try a write now and
		// then, so that it leaves that state when space returns even if no
		// event comes.
		if now := time.Now(); now.Sub(lastProbe) >= 2*time.Second && p.box.Writable() != nil {
			lastProbe = now
			p.box.Probe()
		}
		select {
		case <-p.stop:
			return
		case <-p.store.acks:
		case <-p.box.Ready():
		case <-p.setReady:
		case <-tick.C:
		}
	}
}

// runInProcess publishes pending records in order through the
// in-process broker and acknowledges them in the outbox after Publish
// returned (the broker's store has committed every subscriber's copy by
// then). A record whose publish failed is tried again after a tick,
// before any later one.
func (p *Publisher) runInProcess() {
	defer close(p.done)
	var recs []outbox.Record
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var lastProbe time.Time
	for {
		failed := false
		recs = p.box.Pending(0, p.opts.InFlight, recs[:0])
		var last uint64
		n := 0
		for _, r := range recs {
			if err := p.opts.InProcess.Publish(r.Topic, r.Payload, r.Retain, r.QoS); err != nil {
				p.rl.Warn("publish failed", "publish failed; the event stays queued and is tried again", "seq", r.Seq, "err", err)
				failed = true
				break
			}
			last = r.Seq
			n++
		}
		if n > 0 {
			if err := p.box.Ack(last); err != nil {
				p.log.Error("outbox ack", "seq", last, "err", err)
			}
			p.published.Add(uint64(n))
		}
		p.publishRetained()
		if now := time.Now(); now.Sub(lastProbe) >= 2*time.Second && p.box.Writable() != nil {
			lastProbe = now
			p.box.Probe()
		}
		if n == len(recs) && n == p.opts.InFlight && !failed {
			continue // more may be pending
		}
		var ready <-chan struct{}
		if !failed {
			ready = p.box.Ready()
		}
		select {
		case <-p.stop:
			return
		case <-ready:
		case <-p.setReady:
		case <-tick.C:
		}
	}
}

// Kept is the number of events Close left in the outbox for the next
// start (not acknowledged by the broker within its deadline).
func (p *Publisher) Kept() int { return int(p.kept.Load()) }

// Pending is the number of events not yet acknowledged by the broker.
func (p *Publisher) Pending() int { return p.box.Stats().Pending }

// Close flushes: it waits until every queued event is acknowledged or ctx
// ends, then publishes availability "offline" and disconnects. Events not
// acknowledged by then are safe in the outbox and go out at the next
// start: that is a clean stop, not an error (a SIGTERM while the broker is
// unreachable exits 0); Close logs how many are kept and Kept returns it.
func (p *Publisher) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	var flushErr error
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for p.Pending() > 0 {
		select {
		case <-ctx.Done():
			n := p.Pending()
			p.kept.Store(int64(n))
			p.log.Warn("stopping with events the broker has not acknowledged: kept in the outbox for the next start",
				"kept", n, "why", ctx.Err())
		case <-tick.C:
			continue
		}
		break
	}
	close(p.stop)
	<-p.done
	p.rl.Flush()
	p.publishRetained() // the states set after run's last pass
	if p.opts.InProcess != nil {
		p.send(p.opts.Topics.Availability(), 1, true, []byte(Offline))
		return flushErr
	}
	if p.client.IsConnectionOpen() {
		tok := p.client.Publish(p.opts.Topics.Availability(), 1, true, Offline)
		wait := 2 * time.Second
		if d, ok := ctx.Deadline(); ok {
			wait = min(wait, max(time.Until(d), 100*time.Millisecond))
		}
		tok.WaitTimeout(wait)
	}
	p.client.Disconnect(250)
	return flushErr
}
