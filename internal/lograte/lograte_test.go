package lograte

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the summary timer's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSpace(s.b.String()), "\n")
}

func TestOneLinePerIntervalWithCount(t *testing.T) {
	var buf syncBuffer
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), 200*time.Millisecond)
	for i := range 1000 {
		l.Warn("publish", "publish failed", "seq", i)
	}
	l.Error("other", "another condition")
	time.Sleep(350 * time.Millisecond)
	lines := buf.lines()
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (first, other, summary):\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if !strings.Contains(lines[0], "seq=0") || strings.Contains(lines[0], "repeated") {
		t.Errorf("first line %q", lines[0])
	}
	if !strings.Contains(lines[2], "publish failed") || !strings.Contains(lines[2], "seq=999") || !strings.Contains(lines[2], "repeated=999") {
		t.Errorf("summary %q: want the latest attributes and repeated=999", lines[2])
	}
	// A new occurrence after a window without repeats is logged at once.
	time.Sleep(250 * time.Millisecond)
	l.Warn("publish", "publish failed", "seq", 1000)
	if lines := buf.lines(); len(lines) != 4 || !strings.Contains(lines[3], "seq=1000") {
		t.Fatalf("lines %q", lines)
	}
}

func TestFlushWritesPendingSummaries(t *testing.T) {
	var buf syncBuffer
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), time.Hour)
	l.Warn("k", "m")
	l.Warn("k", "m")
	l.Warn("k", "m")
	l.Flush()
	if lines := buf.lines(); len(lines) != 2 || !strings.Contains(lines[1], "repeated=2") {
		t.Fatalf("lines %q", lines)
	}
}
