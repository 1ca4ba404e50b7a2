package live

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/internal/httpguard"
	"github.com/didoedge/didoedge/runtime/record/mcaprec"
	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/service/control"
	"github.com/didoedge/didoedge/runtime/stream"
)

// Subprotocol is the Foxglove WebSocket protocol this server speaks.
const Subprotocol = "foxglove.websocket.v1"

// Options are the parts of the server that are not in the live section.
type Options struct {
	Logger *slog.Logger
	// Name is the server's name in serverInfo (default "didoedge").
	Name string
	// Intrinsics are fx, fy, cx, cy of the cameras' frames
	// (record.intrinsics): with them each camera gets a
	// camera_calibration channel.
	Intrinsics []float64
	// Confidence: the depth model has its own confidence output (its io
	// spec's confidence key), so each camera gets a confidence channel.
	Confidence bool
	// Domain: the cameras run the domain monitor (stream.MonitorsDomain),
	// so each camera gets a domain channel: the frame's distance to the
	// AuxUE's training domain, smoothed, and the threshold.
	Domain bool
}

// Server is the running live view: it implements stream.Tap (pass it as
// stream.Options.Tap) and serves Foxglove clients and the control API.
type Server struct {
	cfg  runconfig.LiveConfig
	opts Options
	log  *slog.Logger
	sch  *schemas

	// origins may change the configuration over the WebSocket without
	// the token (live.allowed_origins).
	origins httpguard.Origins

	ln      net.Listener
	srv     *http.Server
	done    chan struct{}
	session string

	// cams is an immutable camera -> channels map, replaced by SetCameras,
	// read lock-free by the pipeline (Wants, Frame, Event, State).
	cams atomic.Pointer[map[string]*camChannels]

	mu      sync.RWMutex // guards the fields below
	byID    map[uint32]*channel
	subs    map[uint32]map[*client]uint32 // channel id -> client -> subscription id
	clients map[*client]struct{}
	nextID  uint32
	ctl     *control.Control
	ready   bool

	// frames between the pipeline and the encoder
	free    chan *slot
	work    chan *slot
	encDone chan struct{}
	closed  atomic.Bool
	once    sync.Once

	framesIn, framesDropped   atomic.Uint64 // frames handed over; dropped (encoder busy)
	sent, dropped, connection atomic.Uint64 // messages sent, dropped by slow clients; connections
	encodeNS                  atomic.Int64
}

// Listen binds the live address at once (a taken or bad address fails
// before the models load) and starts the encoder; the server answers 503
// until Attach.
func Listen(ctx context.Context, cfg runconfig.LiveConfig, opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Name == "" {
		opts.Name = "didoedge"
	}
	if cfg.Queue == 0 {
		cfg.Queue = 64
	}
	if opts.Intrinsics != nil && len(opts.Intrinsics) != 4 {
		return nil, fmt.Errorf("live: intrinsics: %d values, want fx, fy, cx, cy", len(opts.Intrinsics))
	}
	sch, err := loadSchemas()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("live.listen %s: %w", cfg.Listen, err)
	}
	s := &Server{cfg: cfg, opts: opts, log: opts.Logger, sch: sch, origins: httpguard.NewOrigins(cfg.AllowedOrigins), ln: ln, done: make(chan struct{}),
		session: strconv.FormatInt(time.Now().UnixNano(), 10),
		byID:    map[uint32]*channel{}, subs: map[uint32]map[*client]uint32{}, clients: map[*client]struct{}{},
		free: make(chan *slot, numSlots), work: make(chan *slot, numSlots), encDone: make(chan struct{})}
	empty := map[string]*camChannels{}
	s.cams.Store(&empty)
	for range numSlots {
		s.free <- &slot{}
	}
	go (&encoder{s: s, jpeg: jpeg85}).run()
	guard := httpguard.Policy{Listener: "live", HostsKey: "live.allowed_hosts", Hosts: cfg.AllowedHosts, Token: cfg.Token}
	s.srv = &http.Server{Handler: httpguard.Wrap(guard, s.handler()), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("live view stopped", "err", err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.done:
		}
	}()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Attach starts serving: the cameras' channels are advertised, and ctl
// (nil: none) answers the control API and the parameters.
func (s *Server) Attach(cameras []string, ctl *control.Control) {
	s.mu.Lock()
	s.ctl, s.ready = ctl, true
	s.mu.Unlock()
	s.SetCameras(cameras)
}

// SetCameras advertises the channels of cameras added since the last call
// to every client, and unadvertises (ending their subscriptions) those of
// cameras no longer listed.
func (s *Server) SetCameras(names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.cams.Load()
	next := make(map[string]*camChannels, len(names))
	var added []advert
	for _, n := range names {
		if cc, ok := old[n]; ok {
			next[n] = cc
			continue
		}
		cc := s.sch.newCamChannels(n, s.opts.Intrinsics != nil, s.opts.Confidence, s.opts.Domain, func() uint32 { s.nextID++; return s.nextID })
		next[n] = cc
		for _, ch := range cc.ch {
			if ch != nil {
				s.byID[ch.id] = ch
				s.subs[ch.id] = map[*client]uint32{}
				added = append(added, ch.advert())
			}
		}
	}
	var removed []uint32
	for n, cc := range old {
		if _, ok := next[n]; ok {
			continue
		}
		for _, ch := range cc.ch {
			if ch == nil {
				continue
			}
			for c, sub := range s.subs[ch.id] {
				delete(c.subs, sub)
			}
			delete(s.subs, ch.id)
			delete(s.byID, ch.id)
			removed = append(removed, ch.id)
		}
	}
	s.cams.Store(&next)
	for c := range s.clients {
		if len(added) > 0 {
			c.sendJSON(map[string]any{"op": "advertise", "channels": added})
		}
		if len(removed) > 0 {
			c.sendJSON(map[string]any{"op": "unadvertise", "channelIds": removed})
		}
	}
}

// Wants implements stream.Tap: whether a client subscribes to one of the
// camera's frame channels (no lock, no allocation).
func (s *Server) Wants(camera string) bool {
	cc := (*s.cams.Load())[camera]
	return cc != nil && cc.wantsFrames()
}

// Frame implements stream.Tap: the subscribed parts of the frame are
// copied into a free slot for the encoder, or the frame is dropped
// (counted) when the encoder has every slot. It never blocks.
func (s *Server) Frame(f *stream.TapFrame) {
	cc := (*s.cams.Load())[f.Camera]
	if cc == nil || s.closed.Load() {
		return
	}
	s.framesIn.Add(1)
	var sl *slot
	select {
	case sl = <-s.free:
	default:
		s.framesDropped.Add(1)
		return
	}
	sl.fill(cc, f)
	s.work <- sl // never blocks: as many places as slots
}

// Event implements alerts.Sink: the event, as published on MQTT, to the
// camera's events subscribers.
func (s *Server) Event(ev *alerts.Event) error {
	return s.jsonMessage(ev.Camera, sEvents, time.UnixMilli(ev.TimeMS), ev)
}

// State implements alerts.Sink: a zone state to the zone_states subscribers.
func (s *Server) State(st *alerts.State) error {
	return s.jsonMessage(st.Camera, sStates, time.UnixMilli(st.TimeMS), st)
}

func (s *Server) jsonMessage(camera string, k int, t time.Time, v any) error {
	cc := (*s.cams.Load())[camera]
	if cc == nil || cc.subs[k].Load() == 0 {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("live %s: %w", cc.ch[k].topic, err)
	}
	s.publish(cc.ch[k], uint64(t.UnixNano()), b)
	return nil
}

// publish queues one message for every subscriber of ch.
func (s *Server) publish(ch *channel, ts uint64, data []byte) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for c, sub := range s.subs[ch.id] {
		c.sendData(sub, ts, data)
	}
}

// intrinsics returns the camera calibration of a w x h frame.
func (s *Server) intrinsics(w, h int) mcaprec.Intrinsics {
	in := s.opts.Intrinsics
	return mcaprec.Intrinsics{Width: w, Height: h, Fx: in[0], Fy: in[1], Cx: in[2], Cy: in[3]}
}

// Stats are the live view's counters.
type Stats struct {
	Clients       int
	FramesIn      uint64 // frames handed over by the pipeline
	FramesDropped uint64 // dropped because the encoder had every slot
	Sent          uint64 // messages written to clients
	Dropped       uint64 // messages lost by clients whose queue was full
	Connections   uint64
	Encode        time.Duration // encoder time in all
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	s.mu.RLock()
	n := len(s.clients)
	s.mu.RUnlock()
	return Stats{Clients: n, FramesIn: s.framesIn.Load(), FramesDropped: s.framesDropped.Load(), Sent: s.sent.Load(),
		Dropped: s.dropped.Load(), Connections: s.connection.Load(), Encode: time.Duration(s.encodeNS.Load())}
}

// RegisterMetrics exports the counters as didoedge_live_*.
func (s *Server) RegisterMetrics(m *stream.Metrics) {
	m.Gauge("didoedge_live_clients", "Foxglove clients connected to the live view.", func() float64 { return float64(s.Stats().Clients) })
	for _, c := range []struct {
		name, help string
		fn         func() uint64
	}{
		{"didoedge_live_frames_total", "Frames the pipeline handed to the live view (only while a client subscribes).", s.framesIn.Load},
		{"didoedge_live_frames_dropped_total", "Frames the live view dropped because its encoder was busy (the pipeline never waits).", s.framesDropped.Load},
		{"didoedge_live_messages_sent_total", "Messages written to live view clients.", s.sent.Load},
		{"didoedge_live_messages_dropped_total", "Messages lost by live view clients that could not keep up (their own queue was full).", s.dropped.Load},
		{"didoedge_live_connections_total", "Live view connections accepted.", s.connection.Load},
	} {
		m.CounterFunc(c.name, c.help, func() float64 { return float64(c.fn()) })
	}
	m.CounterFunc("didoedge_live_changes_applied_total", "Control API and parameter changes applied.", func() float64 {
		if ctl := s.control(); ctl != nil {
			return float64(ctl.Applied())
		}
		return 0
	})
	m.CounterFunc("didoedge_live_changes_refused_total", "Control API and parameter changes refused (invalid, or control off).", func() float64 {
		if ctl := s.control(); ctl != nil {
			return float64(ctl.Refused())
		}
		return 0
	})
}

func (s *Server) control() *control.Control {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ctl
}

// Close disconnects every client, stops the encoder and the listener.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		s.closed.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err = s.srv.Shutdown(ctx) // hijacked websockets are not tracked: close them
		s.mu.Lock()
		for c := range s.clients {
			c.conn.Close()
		}
		s.mu.Unlock()
		<-s.done
		close(s.work)
		<-s.encDone
	})
	return err
}

// authorized checks the bearer token (Authorization header or ?token=).
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	got := r.URL.Query().Get("token")
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		got = strings.TrimPrefix(h, "Bearer ")
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Token)) == 1
}

// originAllowed lets native clients (no Origin), Foxglove's web app,
// pages on this machine and live.allowed_origins connect; with a token
// any origin may (the token is the check), since a browser tab could
// otherwise drive a loopback listener on the user's behalf.
func (s *Server) originAllowed(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || s.cfg.Token != "" || o == "file://" || s.origins.Has(o) {
		return true
	}
	u, err := url.Parse(o)
	if err != nil {
		return false
	}
	h := u.Hostname()
	return h == "foxglove.dev" || strings.HasSuffix(h, ".foxglove.dev") || h == "localhost" || runconfig.IsLoopback(net.JoinHostPort(h, "0"))
}

// changeProof says whether a WebSocket connection may change the vehicle
// (setParameters, and every op that would publish to it or call into
// it), and when not, why. A WebSocket handshake has no CORS: any page
// the operator's browser opens may connect to a loopback listener, so a
// page's origin alone (loopback, foxglove.dev) proves nothing. Proofs:
//   - the token: with live.token_file set, authorized checked it on the
//     upgrade (Foxglove passes it in the URL, ws://HOST:PORT/?token=T,
//     as it opens new WebSocket(url, ["foxglove.websocket.v1"]));
//   - no Origin header: browsers always send one on a WebSocket
//     handshake (RFC 6455 section 4.1), so the client is not a web page
//     but a process of this machine, trusted on a loopback listener as
//     the HTTP API trusts curl with its proof header;
//   - an origin the operator listed in live.allowed_origins (the
//     browser sets Origin; no script can forge it).
func (s *Server) changeProof(r *http.Request) (ok bool, refusal string) {
	o := r.Header.Get("Origin")
	if s.cfg.Token != "" || o == "" || s.origins.Has(o) {
		return true, ""
	}
	return false, fmt.Sprintf("this connection (Origin %q) may only read: a web page changes the configuration only with the live token "+
		"(connect to ws://%s/?token=TOKEN, live.token_file) or from an origin listed in live.allowed_origins", clip(o), clip(r.Host))
}

// clip bounds a header echoed in a message or a log line (a header may
// be up to 1 MB).
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", s.serveWS)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		// A browser page of another site must not change the vehicle on
		// the user's behalf (a loopback listener without a token): the
		// same origins as the WebSocket.
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !s.originAllowed(r) {
			control.HTTPError(w, http.StatusForbidden, fmt.Sprintf("live: origin %q may not change the configuration (without a token only Foxglove and pages of this machine may)", r.Header.Get("Origin")))
			return
		}
		ctl := s.control()
		if ctl == nil {
			control.HTTPError(w, http.StatusServiceUnavailable, "the control API is not attached (starting, or no pipeline)")
			return
		}
		ctl.ServeHTTP(w, r)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="didoedge live"`)
			control.HTTPError(w, http.StatusUnauthorized, "live: missing or wrong token (Authorization: Bearer TOKEN, or ?token=TOKEN)")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// serveWS upgrades a Foxglove client: serverInfo, then the channels.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "didoedge live view: connect Foxglove to ws://%s/ (Open connection > Foxglove WebSocket); control API under /api/\n", r.Host)
		return
	}
	s.mu.RLock()
	ready := s.ready
	s.mu.RUnlock()
	if !ready {
		control.HTTPError(w, http.StatusServiceUnavailable, "live: starting (loading models)")
		return
	}
	up := websocket.Upgrader{Subprotocols: []string{Subprotocol}, CheckOrigin: s.originAllowed,
		ReadBufferSize: 4096, WriteBufferSize: 64 << 10}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	if conn.Subprotocol() != Subprotocol {
		conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.ClosePolicyViolation,
			"subprotocol "+Subprotocol+" required"), time.Now().Add(time.Second))
		conn.Close()
		return
	}
	s.connection.Add(1)
	c := newClient(s, conn, r.RemoteAddr)
	c.mayChange, c.readOnly = s.changeProof(r)
	s.mu.Lock()
	s.clients[c] = struct{}{}
	// Queued under the lock, so that no advertise of a camera added
	// meanwhile comes before them.
	meta := map[string]string{"control": strconv.FormatBool(s.ctl != nil && s.cfg.ControlEnabled() && c.mayChange)}
	if !c.mayChange {
		meta["read_only"] = c.readOnly
	}
	c.sendJSON(map[string]any{"op": "serverInfo", "name": s.opts.Name, "capabilities": []string{"parameters"},
		"metadata": meta, "sessionId": s.session})
	var ads []advert
	for _, id := range slices.Sorted(maps.Keys(s.byID)) {
		ads = append(ads, s.byID[id].advert())
	}
	if len(ads) > 0 {
		c.sendJSON(map[string]any{"op": "advertise", "channels": ads})
	}
	s.mu.Unlock()
	s.log.Info("live view client connected", "remote", r.RemoteAddr, "origin", clip(r.Header.Get("Origin")), "may_change", c.mayChange)
	c.run()
	s.remove(c)
	s.log.Info("live view client disconnected", "remote", r.RemoteAddr, "dropped", c.dropped.Load())
}

// remove ends a client's subscriptions.
func (s *Server) remove(c *client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub, id := range c.subs {
		delete(s.subs[id], c)
		if ch := s.byID[id]; ch != nil {
			s.camOf(ch).subs[ch.stream].Add(-1)
		}
		delete(c.subs, sub)
	}
	delete(s.clients, c)
}

func (s *Server) camOf(ch *channel) *camChannels { return (*s.cams.Load())[ch.camera] }

// subscribe adds a client's subscriptions; it returns a message for each
// refused one.
func (s *Server) subscribe(c *client, subs []subscription) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var refused []string
	for _, sb := range subs {
		ch, ok := s.byID[sb.ChannelID]
		switch {
		case !ok:
			refused = append(refused, fmt.Sprintf("subscribe: no channel %d", sb.ChannelID))
		case c.hasSub(sb.ID):
			refused = append(refused, fmt.Sprintf("subscribe: subscription id %d is in use", sb.ID))
		case c.subscribed(sb.ChannelID):
			refused = append(refused, fmt.Sprintf("subscribe: channel %d (%s) is already subscribed", sb.ChannelID, ch.topic))
		default:
			c.subs[sb.ID] = sb.ChannelID
			s.subs[sb.ChannelID][c] = sb.ID
			s.camOf(ch).subs[ch.stream].Add(1)
		}
	}
	return refused
}

// unsubscribe ends subscriptions by id.
func (s *Server) unsubscribe(c *client, ids []uint32) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var refused []string
	for _, sub := range ids {
		id, ok := c.subs[sub]
		if !ok {
			refused = append(refused, fmt.Sprintf("unsubscribe: no subscription %d", sub))
			continue
		}
		delete(c.subs, sub)
		delete(s.subs[id], c)
		if ch := s.byID[id]; ch != nil {
			s.camOf(ch).subs[ch.stream].Add(-1)
		}
	}
	return refused
}
