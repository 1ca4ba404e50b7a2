package rtspserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/bluenviron/gortsplib/v4"
	"github.com/bluenviron/gortsplib/v4/pkg/base"
	"github.com/bluenviron/gortsplib/v4/pkg/description"
	"github.com/bluenviron/gortsplib/v4/pkg/format"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
)

// FrameSource renders the frames of a generated path.
type FrameSource interface {
	// Size is the constant frame size; both must be multiples of 8 (RFC 2435).
	Size() (width, height int)
	// Render writes frame number index into rgb (interleaved RGB24,
	// len width*height*3). It must be a pure function of index.
	Render(index int, rgb []uint8) error
}

// Generated describes a path served from a FrameSource.
type Generated struct {
	Source FrameSource
	// FPS is the frame rate; default 15.
	FPS float64
	// Quality is the JPEG quality 1..100; default 85 (M-JPEG only).
	Quality int
	// Codec is CodecMJPEG (default, pure Go) or CodecH264 (libx264 through
	// libavcodec, GOP of one second, SPS/PPS in the SDP and before every IDR).
	Codec string
}

// Config configures a Server.
type Config struct {
	// Addr is the TCP listen address, e.g. "127.0.0.1:8554".
	Addr string
	// UDPRTPAddr and UDPRTCPAddr, both set or both empty, enable RTP over
	// UDP unicast for readers ("127.0.0.1:8000" / "127.0.0.1:8001": even
	// RTP port, RTCP port one above). Without them only TCP is served.
	UDPRTPAddr  string
	UDPRTCPAddr string
	// Generated maps a path ("sim", without slashes) to its frame source.
	Generated map[string]Generated
	// RequestTimeout closes a connection whose first request has not
	// arrived within it (default DefaultRequestTimeout).
	RequestTimeout time.Duration
	// MaxConnections bounds the open TCP connections (default
	// DefaultMaxConnections).
	MaxConnections int
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Server serves generated and published paths. See the package comment.
type Server struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	srv       *gortsplib.Server
	guard     *guardListener
	addr      string
	generated map[string]*generatedPath
	published map[string]*publishedPath
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

type generatedPath struct {
	cfg    Generated
	stream *gortsplib.ServerStream
	media  *description.Media
	format format.Format
}

type publishedPath struct {
	stream    *gortsplib.ServerStream
	publisher *gortsplib.ServerSession
}

// New validates cfg. The server does not listen until Start.
func New(cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		return nil, errors.New("rtsp server: empty listen address")
	}
	if (cfg.UDPRTPAddr == "") != (cfg.UDPRTCPAddr == "") {
		return nil, errors.New("rtsp server: set both UDP RTP and RTCP addresses or neither")
	}
	gen := make(map[string]Generated, len(cfg.Generated))
	for p, g := range cfg.Generated {
		name := cleanPath(p)
		if name == "" {
			return nil, fmt.Errorf("rtsp server: generated path %q is empty", p)
		}
		if g.Source == nil {
			return nil, fmt.Errorf("rtsp server: generated path %q has no source", p)
		}
		w, h := g.Source.Size()
		if w <= 0 || h <= 0 || w%8 != 0 || h%8 != 0 || w > 2040 || h > 2040 {
			return nil, fmt.Errorf("rtsp server: path %q: frame size %dx%d must be positive multiples of 8, at most 2040 (RFC 2435)", p, w, h)
		}
		if g.FPS == 0 {
			g.FPS = 15
		}
		if g.FPS < 0 || g.FPS > 240 {
			return nil, fmt.Errorf("rtsp server: path %q: fps %v out of (0, 240]", p, g.FPS)
		}
		if g.Codec == "" {
			g.Codec = CodecMJPEG
		}
		if g.Codec != CodecMJPEG && g.Codec != CodecH264 {
			return nil, fmt.Errorf("rtsp server: path %q: codec %q (want %s or %s)", p, g.Codec, CodecMJPEG, CodecH264)
		}
		if g.Quality == 0 {
			g.Quality = 85
		}
		if g.Quality < 1 || g.Quality > 100 {
			return nil, fmt.Errorf("rtsp server: path %q: jpeg quality %d out of 1..100", p, g.Quality)
		}
		gen[name] = g
	}
	cfg.Generated = gen
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Server{cfg: cfg, log: log.With("rtsp_server", cfg.Addr)}, nil
}

func cleanPath(p string) string { return strings.Trim(p, "/") }

// Start listens and starts the generators. After Close it may be called again.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return errors.New("rtsp server: already started")
	}
	var ln net.Listener
	var guard *guardListener
	srv := &gortsplib.Server{
		Handler:        &handler{s: s},
		RTSPAddress:    s.cfg.Addr,
		UDPRTPAddress:  s.cfg.UDPRTPAddr,
		UDPRTCPAddress: s.cfg.UDPRTCPAddr,
		// gortsplib v4.16.2 writes the NTP fraction as nanoseconds; generated
		// paths send standard reports themselves and published paths relay
		// the publisher's.
		DisableRTCPSenderReports: true,
		ReadTimeout:              10 * time.Second,
		WriteTimeout:             10 * time.Second,
		Listen: func(network, address string) (net.Listener, error) {
			l, err := net.Listen(network, address)
			if err != nil {
				return nil, err
			}
			ln = l
			guard = newGuardListener(l, s.cfg.RequestTimeout, s.cfg.MaxConnections, s.log)
			return guard, nil
		},
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("rtsp server: listen %s: %w", s.cfg.Addr, err)
	}
	s.srv = srv
	s.guard = guard
	s.addr = ln.Addr().String()
	// A restart binds the same port even when the first Start asked for port 0.
	s.cfg.Addr = s.addr
	s.published = make(map[string]*publishedPath)
	s.generated = make(map[string]*generatedPath, len(s.cfg.Generated))
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	for name, g := range s.cfg.Generated {
		w, h := g.Source.Size()
		f, err := newFormat(g, w, h)
		if err != nil {
			cancel()
			srv.Close()
			s.srv = nil
			return fmt.Errorf("rtsp server: path %q: %w", name, err)
		}
		medi := &description.Media{Type: description.MediaTypeVideo, Formats: []format.Format{f}}
		st := &gortsplib.ServerStream{Server: srv, Desc: &description.Session{Medias: []*description.Media{medi}}}
		if err := st.Initialize(); err != nil {
			cancel()
			srv.Close()
			s.srv = nil
			return fmt.Errorf("rtsp server: path %q: %w", name, err)
		}
		gp := &generatedPath{cfg: g, stream: st, media: medi, format: f}
		s.generated[name] = gp
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.generate(ctx, name, gp)
		}()
	}
	s.log.Info("rtsp server listening", "addr", s.addr)
	return nil
}

// Addr is the address the server listens on (useful with port 0).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Close stops the generators, disconnects every client and stops listening.
func (s *Server) Close() {
	s.mu.Lock()
	srv, cancel := s.srv, s.cancel
	s.srv, s.cancel = nil, nil
	s.mu.Unlock()
	if srv == nil {
		return
	}
	cancel()
	s.wg.Wait()
	s.mu.Lock()
	gen, pub := s.generated, s.published
	s.generated, s.published = nil, nil
	s.mu.Unlock()
	for _, g := range gen {
		g.stream.Close()
	}
	for _, p := range pub {
		p.stream.Close()
	}
	srv.Close()
}

// generate renders, encodes and sends one generated path at its frame rate.
// Buffers are reused; the JPEG encoder and RTP packetizer allocate per frame.
func (s *Server) generate(ctx context.Context, name string, gp *generatedPath) {
	w, h := gp.cfg.Source.Size()
	enc, err := newFrameEncoder(gp.cfg, gp.format, w, h)
	if err != nil {
		s.log.Error("frame encoder", "path", name, "err", err)
		return
	}
	defer enc.close()
	rgb := make([]uint8, w*h*3)
	period := time.Duration(float64(time.Second) / gp.cfg.FPS)
	start := time.Now()
	// The stream rewrites every packet's SSRC; reports must carry that one.
	ssrc := gp.stream.Stats().Medias[gp.media].Formats[gp.format].LocalSSRC
	var lastSR time.Time
	var packets, octets uint32
	for index := 0; ; index++ {
		due := start.Add(time.Duration(index) * period)
		if late := time.Since(due); late > period {
			// Behind schedule (slow render): skip frames like a real camera
			// instead of bursting, so the world stays on wall-clock time.
			index += int(late / period)
			due = start.Add(time.Duration(index) * period)
		}
		if wait := time.Until(due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		capture := time.Now()
		if err := gp.cfg.Source.Render(index, rgb); err != nil {
			s.log.Error("render frame", "path", name, "index", index, "err", err)
			return
		}
		pkts, err := enc.encode(rgb)
		if err != nil {
			s.log.Error("encode frame", "path", name, "index", index, "err", err)
			return
		}
		// The RTP clock follows the actual capture instant, so receivers
		// that map it without sender reports still get true intervals.
		ts := uint32(uint64(capture.Sub(start).Microseconds()) * 9 / 100) // 90 kHz, wraps as RTP does
		for _, pkt := range pkts {
			pkt.Timestamp = ts
			if err := gp.stream.WritePacketRTPWithNTP(gp.media, pkt, capture); err != nil {
				s.log.Debug("write packet", "path", name, "err", err)
			}
			packets++
			octets += uint32(len(pkt.Payload))
		}
		// gortsplib's own reports are off (see Start); one per second lets
		// readers map RTP time to wall-clock capture time right away.
		if capture.Sub(lastSR) >= time.Second {
			lastSR = capture
			sr := &rtcp.SenderReport{SSRC: ssrc, NTPTime: ntpTime(capture), RTPTime: ts, PacketCount: packets, OctetCount: octets}
			if err := gp.stream.WritePacketRTCP(gp.media, sr); err != nil {
				s.log.Debug("write sender report", "path", name, "err", err)
			}
		}
	}
}

// ntpTime converts t to the 64-bit NTP format (RFC 5905: seconds since
// 1900 in the upper half, binary fraction in the lower half).
func ntpTime(t time.Time) uint64 {
	const unixToNTP = 2208988800
	ns := uint64(t.UnixNano()) + unixToNTP*uint64(time.Second)
	sec := ns / uint64(time.Second)
	frac := (ns % uint64(time.Second)) << 32 / uint64(time.Second)
	return sec<<32 | frac
}

// handler implements the gortsplib server callbacks.
type handler struct{ s *Server }

func (h *handler) stream(path string) *gortsplib.ServerStream {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	name := cleanPath(path)
	if g, ok := h.s.generated[name]; ok {
		return g.stream
	}
	if p, ok := h.s.published[name]; ok {
		return p.stream
	}
	return nil
}

// OnDescribe implements gortsplib.ServerHandlerOnDescribe.
func (h *handler) OnDescribe(ctx *gortsplib.ServerHandlerOnDescribeCtx) (*base.Response, *gortsplib.ServerStream, error) {
	st := h.stream(ctx.Path)
	if st == nil {
		return &base.Response{StatusCode: base.StatusNotFound}, nil, fmt.Errorf("no stream on path %q", ctx.Path)
	}
	return &base.Response{StatusCode: base.StatusOK}, st, nil
}

// OnAnnounce implements gortsplib.ServerHandlerOnAnnounce: a new publisher
// replaces the previous one of the same path.
func (h *handler) OnAnnounce(ctx *gortsplib.ServerHandlerOnAnnounceCtx) (*base.Response, error) {
	name := cleanPath(ctx.Path)
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return &base.Response{StatusCode: base.StatusServiceUnavailable}, errors.New("server closing")
	}
	if _, ok := s.generated[name]; ok || name == "" {
		return &base.Response{StatusCode: base.StatusBadRequest}, fmt.Errorf("path %q cannot be published to", ctx.Path)
	}
	if old, ok := s.published[name]; ok {
		old.stream.Close()
		old.publisher.Close()
	}
	st := &gortsplib.ServerStream{Server: s.srv, Desc: ctx.Description}
	if err := st.Initialize(); err != nil {
		return &base.Response{StatusCode: base.StatusBadRequest}, fmt.Errorf("path %q: %w", ctx.Path, err)
	}
	s.published[name] = &publishedPath{stream: st, publisher: ctx.Session}
	s.log.Info("publisher announced", "path", name, "remote", remote(ctx.Conn.NetConn()))
	return &base.Response{StatusCode: base.StatusOK}, nil
}

func remote(c net.Conn) string {
	if c == nil {
		return ""
	}
	return c.RemoteAddr().String()
}

// OnSetup implements gortsplib.ServerHandlerOnSetup.
func (h *handler) OnSetup(ctx *gortsplib.ServerHandlerOnSetupCtx) (*base.Response, *gortsplib.ServerStream, error) {
	if ctx.Session.State() == gortsplib.ServerSessionStatePreRecord {
		return &base.Response{StatusCode: base.StatusOK}, nil, nil
	}
	st := h.stream(ctx.Path)
	if st == nil {
		return &base.Response{StatusCode: base.StatusNotFound}, nil, fmt.Errorf("no stream on path %q", ctx.Path)
	}
	return &base.Response{StatusCode: base.StatusOK}, st, nil
}

// OnPlay implements gortsplib.ServerHandlerOnPlay.
func (h *handler) OnPlay(_ *gortsplib.ServerHandlerOnPlayCtx) (*base.Response, error) {
	return &base.Response{StatusCode: base.StatusOK}, nil
}

// OnRecord implements gortsplib.ServerHandlerOnRecord: relay every packet.
func (h *handler) OnRecord(ctx *gortsplib.ServerHandlerOnRecordCtx) (*base.Response, error) {
	name := cleanPath(ctx.Path)
	h.s.mu.Lock()
	p, ok := h.s.published[name]
	h.s.mu.Unlock()
	if !ok || p.publisher != ctx.Session {
		return &base.Response{StatusCode: base.StatusBadRequest}, fmt.Errorf("path %q: not the announced publisher", ctx.Path)
	}
	st := p.stream
	ctx.Session.OnPacketRTPAny(func(medi *description.Media, _ format.Format, pkt *rtp.Packet) {
		if err := st.WritePacketRTP(medi, pkt); err != nil {
			h.s.log.Debug("relay packet", "path", name, "err", err)
		}
	})
	// Relay sender reports under the SSRC the stream gives its packets, so
	// readers can map RTP time to the publisher's capture clock.
	ssrcs := make(map[*description.Media]uint32)
	for medi, ms := range st.Stats().Medias {
		for _, fs := range ms.Formats {
			ssrcs[medi] = fs.LocalSSRC
		}
	}
	ctx.Session.OnPacketRTCPAny(func(medi *description.Media, pkt rtcp.Packet) {
		sr, ok := pkt.(*rtcp.SenderReport)
		if !ok || len(medi.Formats) != 1 {
			return
		}
		out := *sr
		out.SSRC = ssrcs[medi]
		out.Reports = nil
		if err := st.WritePacketRTCP(medi, &out); err != nil {
			h.s.log.Debug("relay sender report", "path", name, "err", err)
		}
	})
	return &base.Response{StatusCode: base.StatusOK}, nil
}

// OnSessionClose implements gortsplib.ServerHandlerOnSessionClose: a leaving
// publisher takes its stream and readers with it.
func (h *handler) OnSessionClose(ctx *gortsplib.ServerHandlerOnSessionCloseCtx) {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, p := range s.published {
		if p.publisher == ctx.Session {
			p.stream.Close()
			delete(s.published, name)
			s.log.Info("publisher left", "path", name)
		}
	}
}

// GuardStats returns how many connections were closed for sending no
// complete request in time and how many were refused at the connection
// limit, since Start.
func (s *Server) GuardStats() (idleClosed, refused uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.guard == nil {
		return 0, 0
	}
	return s.guard.idle.Load(), s.guard.refused.Load()
}
