package broker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/didoedge/didoedge/internal/lograte"
)

// DefaultListen is the address used when Options.Listen is empty: the
// loopback interface only, so that nothing off the vehicle can connect by
// accident.
const DefaultListen = "127.0.0.1:1883"

// Off disables a listener (Options.Listen).
const Off = "off"

// Defaults of the limits.
const (
	DefaultConnectTimeout = 5 * time.Second
	DefaultMaxConnections = 64
	DefaultMessageRate    = 100 // publishes per second per client
	DefaultMessageBurst   = 200
	DefaultMaxPacketBytes = 1 << 20
	// DefaultSessionExpiry bounds how long the broker keeps the session
	// (subscriptions, queued messages) of a client that went away.
	DefaultSessionExpiry = 24 * time.Hour
)

// User is one account of the broker.
type User struct {
	Username, Password string
	// Read lists the topic filters the user may subscribe to (and receive
	// from); Write the filters of the topics it may publish on (and name
	// in its will). A filter grants everything it covers: "a/#" grants
	// "a/b/+". "$SYS" topics are covered only by filters that name "$SYS"
	// explicitly, never by a leading wildcard.
	Read, Write []string
	// Unlimited exempts the user from the message rate limit (the
	// runtime's own publisher).
	Unlimited bool
}

// Options configure the broker.
type Options struct {
	// Listen is host:port of the plain TCP listener; port 0 picks a free
	// port (see Broker.Addr); "off" disables it.
	Listen string
	// TLSListen, with TLS, adds a TLS listener (e.g. "0.0.0.0:8883").
	TLSListen string
	TLS       *tls.Config
	// Users may connect with their password.
	Users []User
	// AllowAnonymous lets clients without username and password in; they
	// may read what AnonymousRead grants and never publish.
	AllowAnonymous bool
	AnonymousRead  []string
	// ConnectTimeout closes connections that have not sent a complete
	// CONNECT within it (default DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// MaxConnections bounds open connections, before and after CONNECT
	// (default DefaultMaxConnections); further ones are closed at once.
	MaxConnections int
	// MessageRate and MessageBurst bound each client's publishes (token
	// bucket; defaults DefaultMessageRate and DefaultMessageBurst).
	// Publishes over the limit are dropped and counted.
	MessageRate  float64
	MessageBurst int
	// MaxPacketBytes bounds an MQTT packet (default DefaultMaxPacketBytes).
	MaxPacketBytes int
	// Store persists sessions, subscriptions, queued and retained
	// messages (Store.Dir empty: memory only). Store.MaxBytes and
	// Store.MaxMessages of zero take the defaults.
	Store StoreSettings
	// Droppable tells the store which queued messages it may drop first
	// when full (alert updates, zone states: a later one supersedes them).
	// Nil: none.
	Droppable func(topic string, payload []byte) bool
	Logger    *slog.Logger
}

// Stats are the broker's counters since Start.
type Stats struct {
	Refused        uint64 // connections closed at the connection limit
	IdleClosed     uint64 // connections closed for not sending CONNECT in time
	AuthFailed     uint64 // CONNECTs with bad credentials or a forbidden will
	Denied         uint64 // publishes and subscriptions the ACL refused
	RateLimited    uint64 // publishes dropped over the message rate
	NotMQTT        uint64 // connections that sent something else than CONNECT
	ClientsCurrent int64
	// QuotaDropped counts messages mochi itself did not queue for a client
	// that had 65535 of them queued already (never reached while the
	// store's bound is below that).
	QuotaDropped int64
	Store        StoreStats // zero without a store
}

// ErrNotPersisted is returned by Publish when a store write failed while
// the message was being queued: it may be lost in a crash, so the caller
// keeps it and publishes it again.
var ErrNotPersisted = errors.New("message not persisted by the broker's store")

// Broker is a running embedded broker.
type Broker struct {
	server    *mqtt.Server
	listeners []*listener
	hook      *aclHook
	store     *storeHook // nil without persistence
	st        *counters
	closed    atomic.Bool
	subID     atomic.Int64
}

type counters struct {
	refused, idle, auth, denied, rated, notMQTT atomic.Uint64
	open                                        atomic.Int64
}

// Start validates the options and starts serving. The broker runs until
// Close is called.
func Start(ctx context.Context, opts Options) (*Broker, error) {
	if opts.Listen == "" {
		opts.Listen = DefaultListen
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = DefaultMaxConnections
	}
	if opts.MessageRate <= 0 {
		opts.MessageRate = DefaultMessageRate
	}
	if opts.MessageBurst <= 0 {
		opts.MessageBurst = DefaultMessageBurst
	}
	if opts.MaxPacketBytes <= 0 {
		opts.MaxPacketBytes = DefaultMaxPacketBytes
	}
	if opts.Listen != Off {
		if err := CheckAddress(opts.Listen); err != nil {
			return nil, fmt.Errorf("start broker: listen: %w", err)
		}
	}
	if (opts.TLSListen == "") != (opts.TLS == nil) {
		return nil, errors.New("start broker: a TLS listener needs both an address and a TLS config")
	}
	if opts.TLSListen != "" {
		if err := CheckAddress(opts.TLSListen); err != nil {
			return nil, fmt.Errorf("start broker: TLS listen: %w", err)
		}
	}
	if opts.Listen == Off && opts.TLSListen == "" {
		return nil, errors.New("start broker: no listener (listen is off and no TLS listener)")
	}
	if len(opts.Users) == 0 && !opts.AllowAnonymous {
		return nil, errors.New("start broker: no users and anonymous access not allowed: nobody could connect")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.AllowAnonymous {
		for _, addr := range []string{opts.Listen, opts.TLSListen} {
			if host, _, err := net.SplitHostPort(addr); err == nil && !isLoopback(host) {
				log.Warn("mqtt broker: anonymous clients may connect from other machines (meant for the demo on loopback); they can read the alerts, not publish",
					"listen", addr)
			}
		}
	}
	st := &counters{}
	hook, err := newACLHook(opts, st, lograte.New(log, 0))
	if err != nil {
		return nil, fmt.Errorf("start broker: %w", err)
	}
	caps := mqtt.NewDefaultServerCapabilities() // without them every client is refused as "server busy"
	caps.MaximumClients = int64(opts.MaxConnections)
	caps.MaximumPacketSize = uint32(opts.MaxPacketBytes)
	caps.MaximumSessionExpiryInterval = uint32(DefaultSessionExpiry / time.Second)
	// A client's queue is bounded by the store (Store.MaxMessages), not
	// by mochi's default of 8192, over which mochi drops messages.
	caps.MaximumInflight = 65535
	opts.Store.SetDefaults()
	if err := opts.Store.Validate("store"); err != nil {
		return nil, fmt.Errorf("start broker: %w", err)
	}
	var store *storeHook
	if opts.Store.Dir != "" {
		// mochi expires queued messages by their Created time against
		// this maximum; the store renumbers Created to keep the resend
		// order (storeHook.OnSessionEstablish), so the maximum is off:
		// a queue ends with its session (DefaultSessionExpiry) or by the
		// store's bound.
		caps.MaximumMessageExpiryInterval = 0
		var err error
		if store, err = openStore(opts.Store, opts.Droppable, log); err != nil {
			return nil, fmt.Errorf("start broker: %w", err)
		}
	}
	// The inline client: the runtime's own publisher, in process
	// (Publish), so that an event counts as delivered once the store has
	// it, not when a TCP PUBACK (sent by mochi before the fan-out) says so.
	server := mqtt.New(&mqtt.Options{Capabilities: caps, InlineClient: true, Logger: slog.New(newMochiHandler(log))})
	if err := server.AddHook(hook, nil); err != nil {
		if store != nil {
			store.Stop()
		}
		return nil, fmt.Errorf("start broker: %w", err)
	}
	if store != nil {
		store.clients = server.Clients.Get
		if err := server.AddHook(store, nil); err != nil {
			store.Stop()
			return nil, fmt.Errorf("start broker: %w", err)
		}
	}
	b := &Broker{server: server, hook: hook, store: store, st: st}
	rl := lograte.New(log, 0)
	sem := make(chan struct{}, opts.MaxConnections)
	add := func(id, addr string, cfg *tls.Config) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		if cfg != nil {
			ln = tls.NewListener(ln, cfg)
		}
		l := &listener{id: id, ln: ln, tls: cfg != nil, timeout: opts.ConnectTimeout, sem: sem, st: st, rl: rl,
			conns: map[net.Conn]struct{}{}}
		b.listeners = append(b.listeners, l)
		return server.AddListener(l)
	}
	fail := func(err error) (*Broker, error) {
		for _, l := range b.listeners {
			l.ln.Close()
		}
		if store != nil {
			store.Stop()
		}
		return nil, err
	}
	if opts.Listen != Off {
		if err := add("tcp", opts.Listen, nil); err != nil {
			return fail(fmt.Errorf("start broker: listen %s: %w", opts.Listen, err))
		}
	}
	if opts.TLSListen != "" {
		if err := add("tls", opts.TLSListen, opts.TLS); err != nil {
			return fail(fmt.Errorf("start broker: TLS listen %s: %w", opts.TLSListen, err))
		}
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if err := server.Serve(); err != nil {
		server.Close()
		return nil, fmt.Errorf("start broker: %w", err)
	}
	return b, nil
}

// CheckAddress validates a host:port listen address: the port is a number
// in 0..65535 and the host, when given, an IP address or a host name.
func CheckAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%q: port %q is not a number in 0..65535", addr, port)
	}
	if host != "" && net.ParseIP(host) == nil && !validHostname(host) {
		return fmt.Errorf("%q: host %q is neither an IP address nor a host name", addr, host)
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func validHostname(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, label := range bytes.Split([]byte(h), []byte(".")) {
		if len(label) == 0 || len(label) > 63 {
			return false
		}
		for i, c := range label {
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' && i > 0 && i < len(label)-1
			if !ok {
				return false
			}
		}
	}
	return true
}

// Addr is the address of the plain TCP listener ("" when it is off).
func (b *Broker) Addr() string {
	for _, l := range b.listeners {
		if !l.tls {
			return l.Address()
		}
	}
	return ""
}

// TLSAddr is the address of the TLS listener ("" without one).
func (b *Broker) TLSAddr() string {
	for _, l := range b.listeners {
		if l.tls {
			return l.Address()
		}
	}
	return ""
}

// Stats returns the broker's counters.
func (b *Broker) Stats() Stats {
	s := Stats{Refused: b.st.refused.Load(), IdleClosed: b.st.idle.Load(), AuthFailed: b.st.auth.Load(),
		Denied: b.st.denied.Load(), RateLimited: b.st.rated.Load(), NotMQTT: b.st.notMQTT.Load(),
		ClientsCurrent: b.st.open.Load(), QuotaDropped: atomic.LoadInt64(&b.server.Info.InflightDropped)}
	if b.store != nil {
		s.Store = b.store.stats()
	}
	return s
}

// Persistent reports whether the broker has a store.
func (b *Broker) Persistent() bool { return b.store != nil }

// Publish publishes a message as the broker's own client, in process.
// mochi delivers it to every matching subscription before Publish
// returns: each subscriber's copy is queued and, with a store, committed
// to disk by then, so that a caller may forget the message once Publish
// returns nil (the runtime's outbox acknowledges its event then). When a
// store write failed meanwhile, it returns ErrNotPersisted: the caller
// keeps the message and publishes it again (a subscriber may then get it
// twice and drops it by its seq).
func (b *Broker) Publish(topic string, payload []byte, retain bool, qos byte) error {
	if b.closed.Load() {
		return fmt.Errorf("publish %s: broker closed", topic)
	}
	var errsBefore uint64
	if b.store != nil {
		defer b.store.publishGate()()
		errsBefore = b.store.writeErrs.Load()
	}
	if err := b.server.Publish(topic, payload, retain, qos); err != nil {
		return fmt.Errorf("publish %s: %w", topic, err)
	}
	if b.store != nil && b.store.writeErrs.Load() != errsBefore {
		return fmt.Errorf("publish %s: %w", topic, ErrNotPersisted)
	}
	return nil
}

// Subscribe has fn called with every message published on topics that
// filter matches, by any client (the runtime's own subscriptions, e.g.
// Home Assistant's status topic). fn runs on the publisher's goroutine:
// it must not block, and for messages that Publish itself sends it must
// not call Publish (the store's gate is not reentrant); for messages from
// TCP clients it may.
func (b *Broker) Subscribe(filter string, fn func(topic string, payload []byte)) error {
	if err := CheckFilter(filter); err != nil {
		return fmt.Errorf("subscribe %q: %w", filter, err)
	}
	id := int(b.subID.Add(1))
	return b.server.Subscribe(filter, id, func(_ *mqtt.Client, _ packets.Subscription, pk packets.Packet) {
		fn(pk.TopicName, pk.Payload)
	})
}

// Message is a publish delivered to an in-process subscription
// (SubscribeMessages): the publishing client's username ("" for
// anonymous and the in-process client) and client id, and whether it
// came as a retained message.
type Message struct {
	Topic    string
	Payload  []byte
	Retained bool
	Username string
	ClientID string
	// InProcess: published by the runtime's own in-process client.
	InProcess bool
}

// SubscribeMessages is Subscribe with who published each message: the
// ACL already refused publishes without a write grant on the topic, so a
// message here comes from a client allowed to publish it.
func (b *Broker) SubscribeMessages(filter string, fn func(Message)) error {
	if err := CheckFilter(filter); err != nil {
		return fmt.Errorf("subscribe %q: %w", filter, err)
	}
	id := int(b.subID.Add(1))
	return b.server.Subscribe(filter, id, func(_ *mqtt.Client, _ packets.Subscription, pk packets.Packet) {
		// mochi hands inline subscriptions its own inline client; the
		// publisher is the packet's origin, still connected while its
		// publish is delivered.
		m := Message{Topic: pk.TopicName, Payload: pk.Payload, Retained: pk.FixedHeader.Retain, ClientID: pk.Origin,
			InProcess: pk.Origin == mqtt.InlineClientId}
		if cl, ok := b.server.Clients.Get(pk.Origin); ok {
			m.Username = string(cl.Properties.Username)
		}
		fn(m)
	})
}

// Close stops the broker and disconnects its clients; the store, if any,
// is closed with it.
func (b *Broker) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	return b.server.Close()
}

// aclHook checks usernames and passwords in constant time, the ACL of
// every publish, subscription and delivery, the will topic at CONNECT,
// and the publish rate of each client.
type aclHook struct {
	mqtt.HookBase
	anonymous     bool
	anonymousRead []string
	users         map[string]*account
	rate          float64
	burst         float64
	st            *counters
	rl            *lograte.Limiter

	mu      sync.Mutex
	buckets map[*mqtt.Client]*bucket
}

type account struct {
	hash        [32]byte
	read, write []string
	unlimited   bool
}

// bucket is a token bucket of publishes.
type bucket struct {
	tokens float64
	last   time.Time
}

func newACLHook(opts Options, st *counters, rl *lograte.Limiter) (*aclHook, error) {
	h := &aclHook{anonymous: opts.AllowAnonymous, anonymousRead: opts.AnonymousRead, users: map[string]*account{},
		rate: opts.MessageRate, burst: float64(opts.MessageBurst), st: st, rl: rl, buckets: map[*mqtt.Client]*bucket{}}
	for _, f := range opts.AnonymousRead {
		if err := CheckFilter(f); err != nil {
			return nil, fmt.Errorf("anonymous read %q: %w", f, err)
		}
	}
	for i, u := range opts.Users {
		if u.Username == "" || u.Password == "" {
			return nil, fmt.Errorf("users[%d]: username and password are required", i)
		}
		if _, dup := h.users[u.Username]; dup {
			return nil, fmt.Errorf("users[%d]: duplicate username %q", i, u.Username)
		}
		for _, f := range append(append([]string(nil), u.Read...), u.Write...) {
			if err := CheckFilter(f); err != nil {
				return nil, fmt.Errorf("users[%d] (%s): %q: %w", i, u.Username, f, err)
			}
		}
		h.users[u.Username] = &account{hash: sha256.Sum256([]byte(u.Password)), read: u.Read, write: u.Write, unlimited: u.Unlimited}
	}
	return h, nil
}

func (h *aclHook) ID() string { return "didoedge-acl" }

func (h *aclHook) Provides(b byte) bool {
	return bytes.Contains([]byte{mqtt.OnConnectAuthenticate, mqtt.OnACLCheck, mqtt.OnPublish, mqtt.OnDisconnect}, []byte{b})
}

// grants returns the read and write filters of a connected client.
func (h *aclHook) grants(cl *mqtt.Client) (read, write []string, unlimited bool) {
	if a, ok := h.users[string(cl.Properties.Username)]; ok && len(cl.Properties.Username) > 0 {
		return a.read, a.write, a.unlimited
	}
	return h.anonymousRead, nil, false
}

func (h *aclHook) OnConnectAuthenticate(cl *mqtt.Client, pk packets.Packet) bool {
	user, pass := pk.Connect.Username, pk.Connect.Password
	var write []string
	switch {
	case len(user) == 0 && len(pass) == 0:
		if !h.anonymous {
			h.refuse(cl, "anonymous clients are not allowed")
			return false
		}
	default:
		a, ok := h.users[string(user)]
		got := sha256.Sum256(pass)
		var want [32]byte
		if ok {
			want = a.hash
		}
		if subtle.ConstantTimeCompare(want[:], got[:]) != 1 || !ok {
			h.refuse(cl, "bad username or password")
			return false
		}
		write = a.write
	}
	// mochi publishes a will without an ACL check: check it here.
	if pk.Connect.WillFlag && !matchesAny(write, pk.Connect.WillTopic) {
		h.refuse(cl, "will topic not writable by this client")
		return false
	}
	return true
}

func (h *aclHook) refuse(cl *mqtt.Client, why string) {
	h.st.auth.Add(1)
	h.rl.Warn("auth: "+why, "mqtt broker: refused a client: "+why, "remote", cl.Net.Remote, "client_id", cl.ID,
		"username", string(cl.Properties.Username), "refused_total", h.st.auth.Load())
}

// OnACLCheck is asked for each publish (write, topic), each subscription
// (read, filter) and each delivery (read, topic).
func (h *aclHook) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool {
	read, wr, _ := h.grants(cl)
	ok := false
	if write {
		ok = matchesAny(wr, topic)
	} else {
		ok = coveredByAny(read, shareless(topic))
	}
	if !ok {
		h.st.denied.Add(1)
		what := "read"
		if write {
			what = "publish"
		}
		h.rl.Warn("acl: "+what, "mqtt broker: access denied", "access", what, "topic", topic, "client_id", cl.ID,
			"username", string(cl.Properties.Username), "remote", cl.Net.Remote, "denied_total", h.st.denied.Load())
	}
	return ok
}

// OnPublish drops publishes over the client's rate.
func (h *aclHook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if _, _, unlimited := h.grants(cl); unlimited || cl.Net.Inline {
		return pk, nil
	}
	now := time.Now()
	h.mu.Lock()
	b := h.buckets[cl]
	if b == nil {
		b = &bucket{tokens: h.burst, last: now}
		h.buckets[cl] = b
	}
	b.tokens = min(h.burst, b.tokens+now.Sub(b.last).Seconds()*h.rate)
	b.last = now
	ok := b.tokens >= 1
	if ok {
		b.tokens--
	}
	h.mu.Unlock()
	if !ok {
		h.st.rated.Add(1)
		h.rl.Warn("rate", "mqtt broker: dropped publishes over the message rate limit", "client_id", cl.ID,
			"rate_per_s", h.rate, "burst", h.burst, "dropped_total", h.st.rated.Load())
		return pk, packets.ErrRejectPacket
	}
	return pk, nil
}

func (h *aclHook) OnDisconnect(cl *mqtt.Client, _ error, _ bool) {
	h.mu.Lock()
	delete(h.buckets, cl)
	h.mu.Unlock()
}
