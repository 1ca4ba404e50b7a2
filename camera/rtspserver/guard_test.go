package rtspserver

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// TestIdleConnectionsClosed: connections that send nothing or half a
// request are closed after RequestTimeout (issue 16 held 900 of them for
// more than 45 s); beyond MaxConnections a new one is closed at once; a
// real request still gets its answer.
func TestIdleConnectionsClosed(t *testing.T) {
	s, err := New(Config{Addr: "127.0.0.1:0", Generated: map[string]Generated{"sim": {Source: gradient{64, 32}}},
		RequestTimeout: 300 * time.Millisecond, MaxConnections: 6, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closedWithin := func(c net.Conn, d time.Duration) bool {
		c.SetReadDeadline(time.Now().Add(d))
		_, err := c.Read(make([]byte, 64))
		var ne net.Error
		return err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}
	var idle []net.Conn
	for range 6 {
		idle = append(idle, dial())
	}
	idle[0].Write([]byte("OPTIONS rtsp://" + s.Addr() + "/sim RTSP/1.0\r\nCSeq: 1\r\n")) // no empty line yet
	time.Sleep(50 * time.Millisecond)
	if over := dial(); !closedWithin(over, 300*time.Millisecond) {
		t.Error("a connection over MaxConnections was kept open")
	}
	start := time.Now()
	for i, c := range idle {
		if !closedWithin(c, 3*time.Second) {
			t.Fatalf("idle connection %d still open after %v", i, time.Since(start))
		}
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("idle connections closed after %v, want about 300 ms", el)
	}
	if idleClosed, refused := s.GuardStats(); idleClosed != 6 || refused != 1 {
		t.Errorf("guard stats: %d idle closed, %d refused; want 6 and 1", idleClosed, refused)
	}
	// A real request, sent slowly but completely within the timeout, is served.
	c := dial()
	c.Write([]byte("OPTIONS rtsp://" + s.Addr() + "/sim RTSP/1.0\r\n"))
	time.Sleep(100 * time.Millisecond)
	c.Write([]byte("CSeq: 1\r\n\r\n"))
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "RTSP/1.0 200") {
		t.Fatalf("OPTIONS answered %q, %v", line, err)
	}
	// Past the timeout the served connection stays open.
	time.Sleep(500 * time.Millisecond)
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); err == nil || !isTimeout(err) {
		t.Errorf("a served connection was closed by the guard: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
