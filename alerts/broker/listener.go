package broker

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/didoedge/didoedge/internal/lograte"
)

// listener is a mochi listener that bounds open connections (before and
// after CONNECT) and closes a connection that has not sent its CONNECT
// within the timeout: the deadline set at accept holds until mochi, having
// read the CONNECT, replaces it with the client's keepalive. It logs how
// each connection ended at the level the cause deserves, one line per
// cause per interval (mochi's own listener logs a WARN with an empty
// message for every one, including plain disconnects).
type listener struct {
	id      string
	ln      net.Listener
	tls     bool
	timeout time.Duration
	sem     chan struct{} // shared by the broker's listeners
	st      *counters
	rl      *lograte.Limiter

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func (l *listener) ID() string              { return l.id }
func (l *listener) Address() string         { return l.ln.Addr().String() }
func (l *listener) Protocol() string        { return "tcp" }
func (l *listener) Init(*slog.Logger) error { return nil }

// Serve accepts connections until Close.
func (l *listener) Serve(establish listeners.EstablishFn) {
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			return
		}
		select {
		case l.sem <- struct{}{}:
		default:
			l.st.refused.Add(1)
			l.rl.Warn("limit", "mqtt broker: connection limit reached, closing a new connection", "remote", conn.RemoteAddr().String(),
				"max_connections", cap(l.sem), "refused_total", l.st.refused.Load())
			conn.Close()
			continue
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			conn.Close()
			<-l.sem
			return
		}
		l.conns[conn] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		conn.SetDeadline(time.Now().Add(l.timeout))
		l.st.open.Add(1)
		go func() {
			defer l.wg.Done()
			err := establish(l.id, conn)
			conn.Close()
			l.mu.Lock()
			delete(l.conns, conn)
			l.mu.Unlock()
			l.st.open.Add(-1)
			<-l.sem
			l.ended(conn, err)
		}()
	}
}

// ended logs why a connection ended.
func (l *listener) ended(conn net.Conn, err error) {
	remote := conn.RemoteAddr().String()
	var code packets.Code
	switch {
	case err == nil, errors.As(err, &code) && (code == packets.CodeDisconnect || code == packets.ErrBadUsernameOrPassword),
		errors.Is(err, packets.CodeDisconnect), errors.Is(err, io.EOF) && !preConnect(err), errors.Is(err, net.ErrClosed):
		// Normal ends; refusals are logged by the ACL hook.
	case errors.Is(err, os.ErrDeadlineExceeded) && preConnect(err):
		l.st.idle.Add(1)
		l.rl.Log(slog.LevelInfo, "idle", "mqtt broker: closed a connection that sent no CONNECT in time", "remote", remote,
			"timeout", l.timeout.String(), "closed_total", l.st.idle.Load())
	case preConnect(err):
		l.st.notMQTT.Add(1)
		l.rl.Warn("not mqtt", "mqtt broker: closed a connection that did not start with a valid CONNECT", "remote", remote,
			"err", err.Error(), "tls", l.tls, "total", l.st.notMQTT.Load())
	default:
		l.rl.Log(slog.LevelInfo, "ended", "mqtt broker: client connection ended with an error", "remote", remote, "err", err.Error())
	}
}

// preConnect reports whether mochi failed before a CONNECT was read
// (its error then starts with "read connection").
func preConnect(err error) bool {
	var te tls.RecordHeaderError
	return errors.As(err, &te) || err != nil && len(err.Error()) >= 15 && err.Error()[:15] == "read connection"
}

// Close stops accepting, closes every connection (also those still
// waiting for a CONNECT) and has mochi close its clients.
func (l *listener) Close(closeClients listeners.CloseFn) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	l.ln.Close()
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	closeClients(l.id)
	l.wg.Wait()
}
