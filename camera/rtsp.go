package camera

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bluenviron/gortsplib/v4"
	"github.com/bluenviron/gortsplib/v4/pkg/base"
	"github.com/bluenviron/gortsplib/v4/pkg/description"
	"github.com/bluenviron/gortsplib/v4/pkg/format"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"

	"github.com/didoedge/didoedge/internal/lograte"
)

// RTSPConfig configures an RTSPSource. Zero values take the defaults.
type RTSPConfig struct {
	// URL is rtsp://[user:pass@]host[:port]/path (or rtsps://).
	URL string
	// SourceID names the frames and events; defaults to the URL without credentials.
	SourceID string
	// UDP selects RTP over UDP; the default is TCP (interleaved), which
	// survives NAT and loses no packets to small socket buffers.
	UDP bool
	// StallTimeout is the no-frame watchdog: a session that delivers no
	// frame for this long is torn down and restarted. Default 2 s.
	StallTimeout time.Duration
	// BackoffMin and BackoffMax bound the reconnect delay, which doubles per
	// consecutive failure and carries up to 50 % jitter. Defaults 250 ms, 5 s.
	BackoffMin time.Duration
	BackoffMax time.Duration
	// RequestTimeout bounds every RTSP request and read. Default 5 s.
	RequestTimeout time.Duration
	// OnEvent receives connected / fault / recovered events, one at a time,
	// synchronously from the source's goroutines: it must return quickly.
	OnEvent func(Event)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// SourceStats are counters of an RTSPSource.
type SourceStats struct {
	Frames       uint64 // frames published
	Dropped      uint64 // frames overwritten before a consumer took them
	Sessions     uint64 // sessions that reached PLAY
	Failures     uint64 // sessions that ended in an error (connect failures included)
	Stalls       uint64 // sessions ended by the watchdog
	DecodeErrors uint64 // corrupt packets or pictures skipped
}

// RTSPSource is a supervised RTSP camera. Run drives it; Next hands out
// frames. Create it with NewRTSPSource.
type RTSPSource struct {
	cfg      RTSPConfig
	url      *base.URL
	redacted string
	log      *slog.Logger
	rl       *lograte.Limiter // repeated session failures: one line per interval
	mb       *Mailbox

	seq          atomic.Uint64
	sessions     atomic.Uint64
	failures     atomic.Uint64
	stalls       atomic.Uint64
	decodeErrors atomic.Uint64

	// faulted is touched by the supervisor goroutine and the RTP callback.
	faulted atomic.Bool
	running atomic.Bool
}

// errStall ends a session whose watchdog fired.
var errStall = errors.New("stall")

// ValidateRTSPURL checks a camera URL as NewRTSPSource does (without
// creating a source), so that a config is refused before anything starts.
// Errors never hold the URL's credentials.
func ValidateRTSPURL(raw string) error {
	_, err := parseRTSPURL(raw)
	return err
}

func parseRTSPURL(raw string) (*base.URL, error) {
	redacted := RedactURL(raw)
	u, err := base.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("camera url %q: %s", redacted, scrub(err.Error(), raw))
	}
	if u.Scheme != "rtsp" && u.Scheme != "rtsps" {
		return nil, fmt.Errorf("camera url %q: scheme %q (want rtsp or rtsps)", redacted, u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("camera url %q: no host", redacted)
	}
	return u, nil
}

// NewRTSPSource validates cfg and returns a source that is not yet running.
func NewRTSPSource(cfg RTSPConfig) (*RTSPSource, error) {
	redacted := RedactURL(cfg.URL)
	u, err := parseRTSPURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.SourceID == "" {
		cfg.SourceID = redacted
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = 2 * time.Second
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = 250 * time.Millisecond
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 5 * time.Second
	}
	if cfg.BackoffMax < cfg.BackoffMin {
		cfg.BackoffMax = cfg.BackoffMin
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &RTSPSource{
		cfg:      cfg,
		url:      u,
		redacted: redacted,
		log:      log.With("camera", cfg.SourceID),
		rl:       lograte.New(log.With("camera", cfg.SourceID), 0),
		mb:       NewMailbox(),
	}, nil
}

// ID returns the source id.
func (s *RTSPSource) ID() string { return s.cfg.SourceID }

// Next implements Source. It returns ErrClosed (or the context error that
// stopped Run) after Run has returned and the last frame was taken.
func (s *RTSPSource) Next(ctx context.Context, dst *Frame) error { return s.mb.Next(ctx, dst) }

// Stats returns the counters.
func (s *RTSPSource) Stats() SourceStats {
	pub, drop := s.mb.Counts()
	return SourceStats{
		Frames: pub, Dropped: drop,
		Sessions: s.sessions.Load(), Failures: s.failures.Load(), Stalls: s.stalls.Load(),
		DecodeErrors: s.decodeErrors.Load(),
	}
}

// Run supervises sessions until ctx is cancelled: every failed or stalled
// session (the first connect included) is retried after a capped,
// jittered exponential backoff. It returns ctx's error.
func (s *RTSPSource) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return fmt.Errorf("camera %s: Run called twice", s.cfg.SourceID)
	}
	defer s.mb.Close(nil)
	attempt := 0
	for {
		delivered, err := s.session(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if delivered {
			attempt = 0
		}
		s.failures.Add(1)
		reason := scrub(err.Error(), s.cfg.URL)
		attempt++
		delay := Backoff(attempt-1, s.cfg.BackoffMin, s.cfg.BackoffMax, rand.Float64())
		// One line per interval while the camera keeps failing, with the
		// count of the retries in between.
		s.rl.Warn("session ended", "camera session ended", "reason", reason, "attempt", attempt, "retry_in", delay)
		if s.faulted.CompareAndSwap(false, true) {
			s.emit(Event{Kind: EventFault, Reason: reason, Attempt: attempt})
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Backoff returns the delay before retry number attempt (0-based):
// d = lo*2^attempt capped at hi, of which the upper half is scaled by u in
// [0,1) ("equal jitter"): the result lies in [d/2, d) and never exceeds hi.
// Jitter keeps a fleet of cameras behind one switch from reconnecting in step.
func Backoff(attempt int, lo, hi time.Duration, u float64) time.Duration {
	d := lo
	for i := 0; i < attempt && d < hi; i++ {
		d *= 2
	}
	if d > hi {
		d = hi
	}
	half := d / 2
	return half + time.Duration(u*float64(d-half))
}

func (s *RTSPSource) emit(e Event) {
	e.SourceID = s.cfg.SourceID
	e.Time = time.Now()
	s.log.Info("camera event", "event", e.Kind.String(), "reason", e.Reason)
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(e)
	}
}

// sessionState is what the RTP callback and the session loop share.
type sessionState struct {
	mu        sync.Mutex // serializes the callback against teardown
	closed    bool
	pipe      *videoPipeline
	work      Frame
	lastFrame atomic.Int64 // unix nanoseconds of the last published frame (or of PLAY)
	delivered atomic.Bool
	clock     rtpClock
	// connected is set once the connected event went out; both goroutines
	// emit under mu, so events never overlap and connected comes first.
	connected bool
}

// markConnected emits the connected event once per session; st.mu is held.
func (s *RTSPSource) markConnected(st *sessionState) {
	if !st.connected {
		st.connected = true
		s.emit(Event{Kind: EventConnected})
	}
}

// session runs one RTSP session: connect, DESCRIBE, SETUP the first video
// media, PLAY, decode until the connection fails, the watchdog fires or ctx
// ends. delivered reports whether any frame came out.
func (s *RTSPSource) session(ctx context.Context) (delivered bool, err error) {
	transport := gortsplib.TransportTCP
	if s.cfg.UDP {
		transport = gortsplib.TransportUDP
	}
	dialer := &net.Dialer{Timeout: s.cfg.RequestTimeout}
	// RTP/RTCP over UDP is received on the interface of the RTSP
	// connection, not on every interface of the vehicle.
	var localIP atomic.Value
	c := &gortsplib.Client{
		Scheme:       s.url.Scheme,
		Host:         s.url.Host,
		Transport:    &transport,
		ReadTimeout:  s.cfg.RequestTimeout,
		WriteTimeout: s.cfg.RequestTimeout,
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if err == nil {
				if a, ok := conn.LocalAddr().(*net.TCPAddr); ok {
					localIP.Store(a.IP.String())
				}
			}
			return conn, err
		},
		ListenPacket: func(network, address string) (net.PacketConn, error) {
			if ip, ok := localIP.Load().(string); ok {
				if _, port, err := net.SplitHostPort(address); err == nil {
					address = net.JoinHostPort(ip, port)
				}
			}
			return net.ListenPacket(network, address)
		},
	}
	if err := c.Start2(); err != nil {
		return false, fmt.Errorf("connect %s: %w", s.redacted, err)
	}
	defer c.Close()
	// Blocking requests (DESCRIBE, SETUP, PLAY) return once the client closes.
	stopOnCancel := context.AfterFunc(ctx, c.Close)
	defer stopOnCancel()

	desc, _, err := c.Describe(s.url)
	if err != nil {
		return false, fmt.Errorf("describe %s: %w", s.redacted, err)
	}
	medi, forma := pickVideo(desc)
	if medi == nil {
		return false, fmt.Errorf("describe %s: no H264, H265 or MJPEG video track", s.redacted)
	}
	pipe, err := newVideoPipeline(forma)
	if err != nil {
		return false, fmt.Errorf("stream %s: %w", s.redacted, err)
	}
	st := &sessionState{pipe: pipe, clock: rtpClock{rate: int64(forma.ClockRate())}}
	defer func() {
		st.mu.Lock()
		st.closed = true
		pipe.close()
		st.mu.Unlock()
	}()
	if _, err := c.Setup(desc.BaseURL, medi, 0, 0); err != nil {
		return false, fmt.Errorf("setup %s: %w", s.redacted, err)
	}
	c.OnPacketRTP(medi, forma, func(pkt *rtp.Packet) {
		s.onPacket(st, pkt)
	})
	c.OnPacketRTCP(medi, func(pkt rtcp.Packet) {
		if sr, ok := pkt.(*rtcp.SenderReport); ok {
			st.mu.Lock()
			st.clock.senderReport(sr.NTPTime, sr.RTPTime)
			st.mu.Unlock()
		}
	})
	if _, err := c.Play(nil); err != nil {
		return false, fmt.Errorf("play %s: %w", s.redacted, err)
	}
	s.sessions.Add(1)
	st.lastFrame.Store(time.Now().UnixNano())
	st.mu.Lock()
	s.markConnected(st)
	st.mu.Unlock()

	waitErr := make(chan error, 1)
	go func() { waitErr <- c.Wait() }()
	tick := time.NewTicker(max(s.cfg.StallTimeout/4, 5*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return st.delivered.Load(), ctx.Err()
		case err := <-waitErr:
			if err == nil {
				err = errors.New("closed")
			}
			return st.delivered.Load(), fmt.Errorf("session %s: %w", s.redacted, err)
		case now := <-tick.C:
			idle := now.Sub(time.Unix(0, st.lastFrame.Load()))
			if idle > s.cfg.StallTimeout {
				s.stalls.Add(1)
				return st.delivered.Load(), fmt.Errorf("session %s: %w: no frame for %v (watchdog %v)",
					s.redacted, errStall, idle.Round(time.Millisecond), s.cfg.StallTimeout)
			}
		}
	}
}

func pickVideo(desc *description.Session) (*description.Media, format.Format) {
	var h264f *format.H264
	if m := desc.FindFormat(&h264f); m != nil {
		return m, h264f
	}
	var h265f *format.H265
	if m := desc.FindFormat(&h265f); m != nil {
		return m, h265f
	}
	var mjpegf *format.MJPEG
	if m := desc.FindFormat(&mjpegf); m != nil {
		return m, mjpegf
	}
	return nil, nil
}

// onPacket runs on gortsplib's reader goroutine, one packet at a time.
func (s *RTSPSource) onPacket(st *sessionState, pkt *rtp.Packet) {
	arrival := time.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return
	}
	capture := st.clock.capture(pkt.Timestamp, arrival)
	// A sender report is the sender's claim (ffmpeg derives it from its own
	// clock since its first packet); a frame cannot be captured after it
	// arrived, whatever the claim.
	if capture.After(arrival) {
		capture = arrival
	}
	rgb, w, h, err := st.pipe.push(pkt, st.work.RGB)
	st.work.RGB = rgb
	if err != nil {
		if !errors.Is(err, errNoPicture) {
			s.decodeErrors.Add(1)
			s.log.Debug("camera decode error", "err", err)
		}
		return
	}
	now := time.Now()
	st.work.SourceID = s.cfg.SourceID
	st.work.Seq = s.seq.Add(1)
	st.work.Capture = capture
	st.work.Decoded = now
	st.work.Codec = st.pipe.codec
	st.work.Width, st.work.Height = w, h
	s.markConnected(st) // the first frame can beat PLAY's return
	s.mb.Publish(&st.work)
	st.lastFrame.Store(now.UnixNano())
	st.delivered.Store(true)
	if s.faulted.CompareAndSwap(true, false) {
		s.emit(Event{Kind: EventRecovered})
	}
}
