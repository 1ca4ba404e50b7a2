package mqttpub

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTwentySIGKILLsUnderLoad: a publisher process emitting events as fast
// as the outbox takes them is killed with SIGKILL 20 times, at random
// moments, on the same outbox: the first 10 kills during a broker outage
// (events pile up on disk), the next 10 with the broker back (kills land
// between publish, PUBACK and the outbox's acknowledgement). A last process
// drains the outbox. mosquitto keeps the subscriber's persistent session
// (QoS 1, clean session false, no queue limit) and mosquitto_sub records
// every message.
// Every event whose Emit returned ("ok INDEX SEQ") must arrive, none with
// a seq another event had, in seq order after the documented dedupe rule.
func TestTwentySIGKILLsUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("20 publisher processes")
	}
	port := freePort(t)
	// mosquitto queues at most 1000 messages for a persistent session
	// whose client is away (max_queued_messages): after the outage the
	// publisher's backlog reaches the broker before mosquitto_sub has
	// reconnected, so the limit is lifted (see docs/alerts.md).
	broker := startMosquitto(t, port, "max_queued_messages 0\n")
	topic := testTopics.Events("front")
	sub := startSubscriber(t, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-c", "-i", "kill-sub", "-q", "1", "-t", topic)
	url := fmt.Sprintf("tcp://127.0.0.1:%d", port)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(16, 20))
	start := time.Now()

	accepted := map[int]uint64{} // event index -> seq its Emit returned
	seqOwner := map[uint64]int{}
	next := 1
	collect := func(h *helper, until string, timeout time.Duration) {
		t.Helper()
		deadline := time.After(timeout)
		for {
			select {
			case l, ok := <-h.lines:
				if !ok {
					return
				}
				if strings.HasPrefix(l, "error") {
					t.Fatalf("publisher: %s", l)
				}
				var i int
				var seq uint64
				if n, _ := fmt.Sscanf(l, "ok %d %d", &i, &seq); n == 2 {
					if o, dup := seqOwner[seq]; dup {
						t.Fatalf("seq %d given to event %d and to event %d", seq, o, i)
					}
					accepted[i], seqOwner[seq] = seq, i
					next = max(next, i+1)
				}
				if until != "" && strings.HasPrefix(l, until) {
					return
				}
			case <-deadline:
				if until != "" {
					t.Fatalf("publisher: no %q within %v", until, timeout)
				}
				return
			}
		}
	}
	broker.stop()
	for k := range 20 {
		if k == 10 {
			broker.start()
		}
		h := startHelper(t, url, dir, next, 100000, 0)
		// Kill it while it emits: after 150..450 ms.
		collect(h, "", time.Duration(150+rng.IntN(300))*time.Millisecond)
		h.kill()
		collect(h, "", time.Second) // the lines it wrote before dying
	}
	produced := len(accepted)
	last := startHelper(t, url, dir, next, 0, 0)
	collect(last, "drained", 60*time.Second)
	t.Cleanup(func() { last.cmd.Process.Signal(syscall.SIGTERM); last.cmd.Wait() })

	var seen map[uint64]bool
	defer func() {
		if t.Failed() {
			var missing []uint64
			for _, seq := range accepted {
				if !seen[seq] {
					missing = append(missing, seq)
				}
			}
			slices.Sort(missing)
			t.Logf("produced %d, seen %d, missing %d: %v", produced, len(seen), len(missing), missing[:min(len(missing), 50)])
		}
	}()
	sub.waitFor(t, 30*time.Second, "every accepted event", func() bool {
		seen = map[uint64]bool{}
		for _, m := range sub.msgs {
			var ev struct{ Seq uint64 }
			if _, err := fmt.Sscanf(m.payload[strings.Index(m.payload, `"seq":`)+6:], "%d", &ev.Seq); err == nil {
				seen[ev.Seq] = true
			}
		}
		return len(seen) >= produced
	})
	elapsed := time.Since(start)
	msgs := sub.messages()
	// No seq reused: every copy of a seq on the wire is the same event.
	bySeq := map[uint64]string{}
	for _, m := range msgs {
		var seq uint64
		fmt.Sscanf(m.payload[strings.Index(m.payload, `"seq":`)+6:], "%d", &seq)
		if p, ok := bySeq[seq]; ok && p != m.payload {
			t.Fatalf("seq %d carried two different events:\n%s\n%s", seq, p, m.payload)
		}
		bySeq[seq] = m.payload
	}
	evs := decodeEvents(t, msgs, topic)
	kept, dups := dedupe(evs)
	got := map[uint64]bool{}
	unreported := 0
	for i, ev := range kept {
		if i > 0 && ev.Seq <= kept[i-1].Seq {
			t.Fatalf("seq %d after %d", ev.Seq, kept[i-1].Seq)
		}
		if idx, ok := seqOwner[ev.Seq]; ok && int(ev.FrameSeq) != idx {
			t.Fatalf("seq %d carries event %d, but Emit gave it to event %d", ev.Seq, ev.FrameSeq, idx)
		} else if !ok {
			// Stored, but the process died between Emit's return and its
			// "ok" line: durable, delivered, just not reported.
			unreported++
		}
		got[ev.Seq] = true
	}
	lost := 0
	for i, seq := range accepted {
		if !got[seq] {
			lost++
			t.Errorf("event %d (seq %d) accepted but never delivered", i, seq)
		}
	}
	// In order: a seq below the highest seen is a duplicate of one already
	// received, never a first arrival.
	first := map[uint64]bool{}
	var hi uint64
	for _, ev := range evs {
		if ev.Seq <= hi && !first[ev.Seq] {
			t.Fatalf("seq %d first arrived after seq %d", ev.Seq, hi)
		}
		first[ev.Seq] = true
		hi = max(hi, ev.Seq)
	}
	t.Logf("20 SIGKILLs (10 during the outage, 10 with the broker up): %d events produced (Emit returned and reported), %d delivered "+
		"(%d more stored by a process killed before it could report them), %d lost, 0 seqs reused, %d duplicates on the wire dropped by seq, in order; %v",
		produced, len(kept)-unreported, unreported, lost, dups, elapsed.Round(100*time.Millisecond))
}
