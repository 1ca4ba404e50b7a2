package mqttpub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts/outbox"
)

// budgetFile fails writes past a shared byte budget with ENOSPC, as a full
// file system does (after writing what fits).
type budgetFile struct {
	*os.File
	b *budget
}

type budget struct {
	mu   sync.Mutex
	left int
}

func (f *budgetFile) Write(p []byte) (int, error) {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	n := min(len(p), f.b.left)
	n, _ = f.File.Write(p[:n])
	f.b.left -= n
	if n < len(p) {
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return n, nil
}

func (f *budgetFile) Truncate(size int64) error {
	st, err := f.File.Stat()
	if err != nil {
		return err
	}
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	f.b.mu.Lock()
	f.b.left += int(st.Size() - size)
	f.b.mu.Unlock()
	return nil
}

type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestEventNotQueuedHasNoSeq: with the disk full, Emit fails, reports
// ErrNotWritable, leaves the event without a seq (0: it must not be shown
// with the seq the next event gets), counts it and logs it once; when
// space returns the publisher's probe ends the fault state without an
// event, and the next event is queued and delivered.
func TestEventNotQueuedHasNoSeq(t *testing.T) {
	port := freePort(t)
	startMosquitto(t, port, "")
	sub := startSubscriber(t, "-h", "127.0.0.1", "-p", fmt.Sprint(port), "-q", "1", "-t", testTopics.Events("front"))
	b := &budget{left: 64} // the base record of the first segment fits
	box, err := outbox.Open(outbox.Options{Dir: t.TempDir(), MaxBytes: 1 << 20, MaxRecords: 100, SegmentBytes: 1 << 16,
		WrapFile: func(f *os.File) outbox.File { return &budgetFile{File: f, b: b} }})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	var logs syncLog
	pub, err := Open(Options{Broker: fmt.Sprintf("tcp://127.0.0.1:%d", port), ClientID: "notqueued", Topics: testTopics,
		RetryInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, box)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close(context.Background())
	for i := range 5 {
		ev := syntheticEvent(i + 1)
		if _, err := pub.Emit(&ev); !errors.Is(err, outbox.ErrNotWritable) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("emit on a full disk: %v", err)
		}
		if ev.Seq != 0 {
			t.Fatalf("an event not queued kept seq %d", ev.Seq)
		}
	}
	if pub.NotQueued() != 5 || pub.OutboxWritable() == nil || !pub.OutboxStats().DiskFull {
		t.Fatalf("not queued %d, writable %v, stats %+v", pub.NotQueued(), pub.OutboxWritable(), pub.OutboxStats())
	}
	if n := strings.Count(logs.String(), "alert event NOT queued"); n != 1 {
		t.Fatalf("%d log lines for 5 events not queued, want 1 (the rest in the summary):\n%s", n, logs.String())
	}
	b.mu.Lock()
	b.left = 1 << 20 // space is back
	b.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for pub.OutboxWritable() != nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if err := pub.OutboxWritable(); err != nil {
		t.Fatalf("still not writable 5 s after space returned, without an event: %v", err)
	}
	ev := syntheticEvent(6)
	seq, err := pub.Emit(&ev)
	if err != nil || seq != 1 || ev.Seq != 1 {
		t.Fatalf("emit after recovery: seq %d (event %d), %v", seq, ev.Seq, err)
	}
	sub.waitFor(t, 10*time.Second, "the event queued after recovery", func() bool { return len(sub.msgs) == 1 })
	if !strings.Contains(sub.messages()[0].payload, `"seq":1,`) {
		t.Fatalf("delivered %q", sub.messages()[0].payload)
	}
}

// TestOutageLogsAreSummarized: during a broker outage with events in
// flight, "publish failed" and "connection lost" are logged once each per
// interval, not on every loop pass (issue 16: 887 lines in 5 s for 2
// events).
func TestOutageLogsAreSummarized(t *testing.T) {
	port := freePort(t)
	broker := startMosquitto(t, port, "")
	box, err := outbox.Open(outbox.Options{Dir: t.TempDir(), MaxBytes: 1 << 20, MaxRecords: 1000, SegmentBytes: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	var logs syncLog
	pub, err := Open(Options{Broker: fmt.Sprintf("tcp://127.0.0.1:%d", port), ClientID: "outage-logs", Topics: testTopics,
		RetryInterval: 100 * time.Millisecond, KeepAlive: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, box)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !pub.Connected(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not connected")
		}
	}
	broker.stop()
	for i := range 50 {
		ev := syntheticEvent(i + 1)
		if _, err := pub.Emit(&ev); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Second)
	out := logs.String()
	for _, msg := range []string{"publish failed", "mqtt connection lost"} {
		if n := strings.Count(out, msg); n > 2 {
			t.Errorf("%d %q lines in 5 s of outage, want at most 2 (the first and a summary)", n, msg)
		}
	}
	if total := strings.Count(out, "\n"); total > 10 {
		t.Errorf("%d log lines in 5 s of outage:\n%s", total, out)
	}
	broker.start()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pub.Close(ctx); err != nil {
		t.Fatalf("close after the outage: %v", err)
	}
}
