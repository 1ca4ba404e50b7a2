package mqttpub

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/outbox"
	"github.com/didoedge/didoedge/alerts/schema"
)

// The test binary re-executes itself as a publisher process when this
// variable is set, so that restarts and crashes are real processes.
const helperEnv = "DIDOEDGE_ALERTS_PUBLISHER_HELPER"

var testTopics = alerts.Topics{Prefix: "didoedge", Vehicle: "van-07"}

// syntheticEvent is event i of a test stream: frame_seq carries i, so
// that a subscriber can check that seq and i agree.
func syntheticEvent(i int) alerts.Event {
	types := []alerts.EventType{alerts.EventNew, alerts.EventUpdate, alerts.EventEnd}
	ms := int64(1_700_000_000_000) + int64(i/3)*1000
	lv := alerts.LevelWarn
	if types[i%3] == alerts.EventEnd {
		lv = alerts.LevelOK
	}
	return alerts.Event{Schema: alerts.EventSchemaID, ID: fmt.Sprintf("front-lane-%d-%d", ms, i/3+1),
		Type: types[i%3], Kind: alerts.KindZone, Vehicle: "van-07", Camera: "front", Zone: "lane",
		Level: lv, Previous: alerts.LevelOK, Reasons: []string{"ood_fraction"}, StartMS: ms, TimeMS: ms + int64(i%3)*100,
		FrameSeq: uint64(i)}
}

// TestHelperPublisher is not a test: it is the publisher process started
// by the tests below. It emits COUNT events from FIRST, prints "emitted",
// waits until they are acknowledged, prints "drained", and on SIGTERM
// closes with a flush. Each event whose Emit returned is printed as
// "ok INDEX SEQ".
func TestHelperPublisher(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("helper process only")
	}
	env := func(k string) int { v, _ := strconv.Atoi(os.Getenv(k)); return v }
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	box, err := outbox.Open(outbox.Options{Dir: os.Getenv("OUTBOX"), MaxBytes: 64 << 20, MaxRecords: 100000, SegmentBytes: 64 << 10})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	pub, err := Open(Options{Broker: os.Getenv("BROKER"), ClientID: "didoedge-test-publisher", Topics: testTopics,
		RetryInterval: 200 * time.Millisecond, KeepAlive: 2 * time.Second}, box)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	first, count := env("FIRST"), env("COUNT")
	for i := first; i < first+count; i++ {
		ev := syntheticEvent(i)
		seq, err := pub.Emit(&ev)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(3)
		}
		// Emit returned: the event is fsynced with this seq.
		fmt.Println("ok", i, seq)
		time.Sleep(time.Duration(env("INTERVAL_MS")) * time.Millisecond)
	}
	fmt.Println("emitted", count)
	for pub.Pending() > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("drained")
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := pub.Close(ctx); err != nil {
		fmt.Println("error", err)
		os.Exit(4)
	}
	box.Close()
	os.Exit(0)
}

// helper is a running publisher process.
type helper struct {
	cmd   *exec.Cmd
	lines chan string
}

func startHelper(t *testing.T, broker, dir string, first, count, intervalMS int) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPublisher$", "-test.v=false")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "BROKER="+broker, "OUTBOX="+dir,
		fmt.Sprintf("FIRST=%d", first), fmt.Sprintf("COUNT=%d", count), fmt.Sprintf("INTERVAL_MS=%d", intervalMS))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, lines: make(chan string, 100)}
	go func(r io.Reader) {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}(out)
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return h
}

func (h *helper) expect(t *testing.T, prefix string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-h.lines:
			if !ok {
				t.Fatalf("publisher process ended before %q", prefix)
			}
			if strings.HasPrefix(l, "error") {
				t.Fatalf("publisher process: %s", l)
			}
			if strings.HasPrefix(l, prefix) {
				return
			}
		case <-deadline:
			t.Fatalf("publisher process: no %q within %v", prefix, timeout)
		}
	}
}

// kill ends the process by its PID with SIGKILL: a crash.
func (h *helper) kill() {
	h.cmd.Process.Signal(syscall.SIGKILL)
	h.cmd.Wait()
}

// decodeEvents checks every payload against the event schema and returns
// the events in arrival order.
func decodeEvents(t *testing.T, msgs []message, topic string) []alerts.Event {
	t.Helper()
	sch, err := schema.Load(schema.Event)
	if err != nil {
		t.Fatal(err)
	}
	var out []alerts.Event
	for _, m := range msgs {
		if m.topic != topic {
			continue
		}
		if err := sch.Validate([]byte(m.payload)); err != nil {
			t.Fatalf("payload fails the event schema: %v\n%s", err, m.payload)
		}
		var ev alerts.Event
		if err := json.Unmarshal([]byte(m.payload), &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// dedupe applies the documented subscriber rule: drop a seq not above the
// highest seen.
func dedupe(evs []alerts.Event) (kept []alerts.Event, dups int) {
	var last uint64
	for _, ev := range evs {
		if ev.Seq <= last {
			dups++
			continue
		}
		last = ev.Seq
		kept = append(kept, ev)
	}
	return kept, dups
}

// TestOutageAndRestartDeliverEverythingInOrder: 500 events; the broker is
// stopped for 10 s in the middle; the publisher process is killed during
// the outage and a new one started on the same outbox. mosquitto_sub
// (persistent session, QoS 1) must see all 500, in order, none missing.
func TestOutageAndRestartDeliverEverythingInOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("10 s broker outage")
	}
	port := freePort(t)
	broker := startMosquitto(t, port, "")
	topic := testTopics.Events("front")
	sub := startSubscriber(t, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-c", "-i", "outage-sub", "-q", "1", "-t", topic)
	dir := t.TempDir()
	url := fmt.Sprintf("tcp://127.0.0.1:%d", port)
	count := func() int { return len(sub.msgs) }

	a := startHelper(t, url, dir, 1, 250, 10)
	sub.waitFor(t, 20*time.Second, "60 events before the outage", func() bool { return count() >= 60 })
	broker.stop()
	stopped := time.Now()
	a.expect(t, "emitted", 20*time.Second)
	a.kill() // crash with events in the outbox and none acknowledged since the outage

	b := startHelper(t, url, dir, 251, 250, 2)
	b.expect(t, "emitted", 20*time.Second)
	time.Sleep(time.Until(stopped.Add(10 * time.Second)))
	broker.start()
	t.Logf("broker down for %v", time.Since(stopped).Round(100*time.Millisecond))
	b.expect(t, "drained", 30*time.Second)

	seen := func() int {
		n := map[uint64]bool{}
		for _, m := range sub.msgs {
			var ev struct{ Seq uint64 }
			json.Unmarshal([]byte(m.payload), &ev)
			n[ev.Seq] = true
		}
		return len(n)
	}
	sub.waitFor(t, 30*time.Second, "500 distinct events", func() bool { return seen() >= 500 })
	b.cmd.Process.Signal(syscall.SIGTERM)
	if err := b.cmd.Wait(); err != nil {
		t.Fatalf("publisher process did not close cleanly: %v", err)
	}

	evs := decodeEvents(t, sub.messages(), topic)
	kept, dups := dedupe(evs)
	if len(kept) != 500 {
		t.Fatalf("%d distinct events in order, want 500 (%d received, %d duplicates)", len(kept), len(evs), dups)
	}
	for i, ev := range kept {
		if ev.Seq != uint64(i+1) || ev.FrameSeq != uint64(i+1) {
			t.Fatalf("event %d: seq %d frame_seq %d, want %d", i, ev.Seq, ev.FrameSeq, i+1)
		}
	}
	// Nothing may arrive out of order: a seq below the highest seen is a
	// duplicate of one already received, never a first arrival.
	first := map[uint64]bool{}
	var last uint64
	for _, ev := range evs {
		if ev.Seq <= last && !first[ev.Seq] {
			t.Fatalf("seq %d first arrived after seq %d", ev.Seq, last)
		}
		first[ev.Seq] = true
		last = max(last, ev.Seq)
	}
	t.Logf("500 events delivered in order; %d duplicates on the wire dropped by seq", dups)
}

// TestReconnectInProcessKeepsOrder: one publisher process rides through a
// short broker outage with events in flight, so that paho reconnects and
// resends its stored publishes while new events keep coming.
func TestReconnectInProcessKeepsOrder(t *testing.T) {
	port := freePort(t)
	broker := startMosquitto(t, port, "")
	topic := testTopics.Events("front")
	sub := startSubscriber(t, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-c", "-i", "reconnect-sub", "-q", "1", "-t", topic)
	box, err := outbox.Open(outbox.Options{Dir: t.TempDir(), MaxBytes: 16 << 20, MaxRecords: 10000, SegmentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	pub, err := Open(Options{Broker: fmt.Sprintf("tcp://127.0.0.1:%d", port), ClientID: "reconnect-test", Topics: testTopics,
		RetryInterval: 100 * time.Millisecond, InFlight: 32}, box)
	if err != nil {
		t.Fatal(err)
	}
	const total = 300
	emitted := make(chan struct{})
	go func() {
		defer close(emitted)
		for i := 1; i <= total; i++ {
			ev := syntheticEvent(i)
			if _, err := pub.Emit(&ev); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(3 * time.Millisecond)
		}
	}()
	sub.waitFor(t, 10*time.Second, "50 events", func() bool { return len(sub.msgs) >= 50 })
	broker.stop()
	time.Sleep(1500 * time.Millisecond)
	broker.start()
	<-emitted
	sub.waitFor(t, 20*time.Second, "all events", func() bool {
		kept, _ := dedupe(decodeEvents(t, sub.msgs, topic))
		return len(kept) >= total
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := pub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	evs := decodeEvents(t, sub.messages(), topic)
	kept, dups := dedupe(evs)
	for i, ev := range kept {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: out of order or missing", i, ev.Seq)
		}
	}
	if len(kept) != total {
		t.Fatalf("%d distinct events, want %d", len(kept), total)
	}
	t.Logf("%d events in order across a reconnect; %d duplicates dropped by seq", total, dups)
}
