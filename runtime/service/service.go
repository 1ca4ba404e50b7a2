package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/didoedge/didoedge/internal/httpguard"
	"github.com/didoedge/didoedge/runtime/stream"
)

// Pipeline is what the service endpoints read; *stream.Pipeline
// implements it.
type Pipeline interface {
	// Cameras lists the camera names in config order.
	Cameras() []string
	Metrics() *stream.Metrics
	// Ready reports whether every camera's frames are being assessed.
	Ready() bool
	// CameraReady reports it per camera.
	CameraReady() map[string]bool
	// Health reports whether the pipeline works (/healthz).
	Health() stream.Health
}

// DefaultStartupGrace is how long /healthz answers "starting" (200) before
// a pipeline is attached: loading models can take minutes (TensorRT
// builds its engines on a first start), and a health check that restarts
// the service meanwhile would never let it finish.
const DefaultStartupGrace = 15 * time.Minute

// Server is the running HTTP server.
type Server struct {
	srv     *http.Server
	ln      net.Listener
	done    chan struct{}
	handler atomic.Pointer[http.Handler]
	control atomic.Pointer[http.Handler] // the control API (AttachControl); nil: off
	started time.Time
	grace   time.Duration
}

// Option changes how the server listens.
type Option func(*httpguard.Policy)

// AllowedHosts are the names, besides loopback and the listener's own
// addresses, that the listener is reached by (http.allowed_hosts): every
// other Host header is refused with 421 against DNS rebinding.
func AllowedHosts(names []string) Option {
	return func(p *httpguard.Policy) { p.Hosts = names }
}

// Listen binds addr at once, so that a taken or bad address is reported
// before anything else starts, and serves the start-up endpoints until
// Attach: /healthz answers 200 "starting" for up to grace after Listen
// (then 503), /readyz and everything else 503. Every endpoint is behind
// internal/httpguard: a Host this server does not serve gets 421, a
// request that changes something needs the X-Didoedge-Request header.
func Listen(ctx context.Context, addr string, grace time.Duration, log *slog.Logger, opts ...Option) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http.listen %s: %w", addr, err)
	}
	s := &Server{ln: ln, done: make(chan struct{}), started: time.Now(), grace: grace}
	starting := s.startingHandler()
	s.handler.Store(&starting)
	policy := httpguard.Policy{Listener: "http", HostsKey: "http.allowed_hosts"}
	for _, o := range opts {
		o(&policy)
	}
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second,
		Handler: httpguard.Wrap(policy, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*s.handler.Load()).ServeHTTP(w, r) }))}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("debug page stopped", "err", err)
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

// Attach serves the pipeline's endpoints from now on: page (the debug
// page, which serves Handler's endpoints too) or, when page is nil,
// Handler's alone; and the camera routes of the control API
// (AttachControl).
func (s *Server) Attach(p Pipeline, page http.Handler) {
	if page == nil {
		page = Handler(p)
	}
	mux := http.NewServeMux()
	mux.Handle("/", page)
	mux.HandleFunc("POST /api/cameras", s.serveControl)
	mux.HandleFunc("DELETE /api/cameras/{camera}", s.serveControl)
	var h http.Handler = mux
	s.handler.Store(&h)
}

// AttachControl lets the page add and remove cameras through the control
// API (control.Control, which serves POST /api/cameras and DELETE
// /api/cameras/{camera}, validates, applies and counts each change). Only
// attach it where the control API itself may be used without a token:
// the debug page has none (cmd/didoedge attaches it to a loopback
// listener with live.control on).
func (s *Server) AttachControl(ctl http.Handler) { s.control.Store(&ctl) }

// serveControl forwards a camera change to the control API. A browser
// page of another origin must not drive it on the user's behalf: the
// guard (Listen) already refused a foreign Host and a request without the
// X-Didoedge-Request header; on top, a request whose Origin is not this
// server is refused, and a POST must be application/json.
func (s *Server) serveControl(w http.ResponseWriter, r *http.Request) {
	ctl := s.control.Load()
	if ctl == nil {
		writeJSONStatus(w, http.StatusServiceUnavailable, map[string]string{
			"error": "the control API is off on this page: it needs live.listen with live.control on, and a loopback http.listen"})
		return
	}
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		writeJSONStatus(w, http.StatusForbidden, map[string]string{"error": fmt.Sprintf("origin %q is not this page's", o)})
		return
	}
	if r.Method == http.MethodPost && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		writeJSONStatus(w, http.StatusUnsupportedMediaType, map[string]string{"error": "Content-Type: application/json required"})
		return
	}
	(*ctl).ServeHTTP(w, r)
}

func (s *Server) startingHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if el := time.Since(s.started); el > s.grace {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "unhealthy\nstarting: FAIL still loading models after %s (limit %s)\n", el.Round(time.Second), s.grace)
			return
		}
		fmt.Fprintf(w, "starting\nstarting: ok loading models for %s (limit %s)\n", time.Since(s.started).Round(time.Second), s.grace)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "starting: loading models", http.StatusServiceUnavailable)
	})
	return mux
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server, waiting at most 2 s for requests in flight.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	return err
}

// Handler returns the service endpoints of a pipeline: /metrics in the
// Prometheus text format, /healthz and /readyz (text, or JSON on request).
func Handler(p Pipeline) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(p.Metrics().Registry(), promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		h := p.Health()
		code := http.StatusOK
		if !h.OK {
			code = http.StatusServiceUnavailable
		}
		if wantsJSON(r) {
			writeJSONStatus(w, code, h)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		switch {
		case !h.OK:
			io.WriteString(w, "unhealthy\n")
		case len(h.Degraded) > 0:
			fmt.Fprintf(w, "degraded: %s\n", strings.Join(h.Degraded, ", "))
		default:
			io.WriteString(w, "ok\n")
		}
		for _, c := range h.Checks {
			state := "ok"
			if !c.OK && c.Critical {
				state = "FAIL"
			} else if !c.OK {
				state = "DEGRADED"
			}
			if c.Camera != "" {
				fmt.Fprintf(w, "%s: %s camera %s: %s\n", c.Name, state, c.Camera, c.Detail)
				continue
			}
			fmt.Fprintf(w, "%s: %s %s\n", c.Name, state, c.Detail)
		}
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ready := p.Ready()
		code := http.StatusOK
		if !ready {
			code = http.StatusServiceUnavailable
		}
		if wantsJSON(r) {
			h := p.Health()
			writeJSONStatus(w, code, struct {
				Ready   bool                  `json:"ready"`
				Status  string                `json:"status"`
				Cameras []stream.CameraHealth `json:"cameras"`
			}{ready, h.Status, h.Cameras})
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		if ready {
			io.WriteString(w, "ready\n")
		} else {
			io.WriteString(w, "not ready: a camera had no frame assessed in the last 2 s\n")
		}
		per := p.CameraReady()
		for _, name := range p.Cameras() {
			state := "ready"
			if !per[name] {
				state = "not ready"
			}
			fmt.Fprintf(w, "camera %s: %s\n", name, state)
		}
	})
	return mux
}

// wantsJSON: /healthz and /readyz answer JSON for ?format=json or an
// Accept header naming application/json (text otherwise, for people and
// curl).
func wantsJSON(r *http.Request) bool {
	return r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json")
}

func writeJSONStatus(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
