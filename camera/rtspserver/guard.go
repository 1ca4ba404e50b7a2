package rtspserver

import (
	"bytes"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/didoedge/didoedge/internal/lograte"
)

// Defaults of the connection guard.
const (
	DefaultRequestTimeout = 5 * time.Second
	DefaultMaxConnections = 64
)

// guardListener bounds the open connections and closes a connection whose
// first request (its header, up to the empty line) has not arrived within
// the timeout. gortsplib reads requests without a deadline, so a client
// that connects and sends nothing, or half a request, would otherwise hold
// its connection (and goroutines) for ever.
type guardListener struct {
	net.Listener
	timeout time.Duration
	slots   chan struct{}
	rl      *lograte.Limiter
	idle    atomic.Uint64
	refused atomic.Uint64
}

func newGuardListener(ln net.Listener, timeout time.Duration, maxConns int, log *slog.Logger) *guardListener {
	return &guardListener{Listener: ln, timeout: timeout, slots: make(chan struct{}, maxConns), rl: lograte.New(log, 0)}
}

// Accept returns the next connection within the limit; connections over
// it are closed at once.
func (l *guardListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
		default:
			n := l.refused.Add(1)
			l.rl.Warn("limit", "rtsp server: connection limit reached, closing a new connection", "remote", c.RemoteAddr().String(),
				"max_connections", cap(l.slots), "refused_total", n)
			c.Close()
			continue
		}
		g := &guardConn{Conn: c, l: l}
		g.timer = time.AfterFunc(l.timeout, g.expire)
		return g, nil
	}
}

// guardConn closes itself unless a complete request header was read in
// time; it gives its slot back once closed.
type guardConn struct {
	net.Conn
	l       *guardListener
	timer   *time.Timer
	mu      sync.Mutex
	head    []byte // bytes read before the first complete header
	done    bool   // a complete header arrived
	expired bool
	closed  sync.Once
}

func (c *guardConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if !c.done && !c.expired {
			c.head = append(c.head, p[:n]...)
			// RTSP (like HTTP) ends a request header with an empty line;
			// interleaved binary data ('$') can only follow a request.
			if bytes.Contains(c.head, []byte("\r\n\r\n")) {
				c.done, c.head = true, nil
				c.timer.Stop()
			} else if len(c.head) > 64<<10 {
				c.expired = true // a header this long is not a request
				c.mu.Unlock()
				c.Close()
				return n, err
			}
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *guardConn) expire() {
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		return
	}
	c.expired = true
	c.mu.Unlock()
	n := c.l.idle.Add(1)
	c.l.rl.Log(slog.LevelInfo, "idle", "rtsp server: closed a connection that sent no complete request in time",
		"remote", c.RemoteAddr().String(), "timeout", c.l.timeout.String(), "closed_total", n)
	c.Close()
}

func (c *guardConn) Close() error {
	err := c.Conn.Close()
	c.closed.Do(func() {
		c.timer.Stop()
		<-c.l.slots
	})
	return err
}
