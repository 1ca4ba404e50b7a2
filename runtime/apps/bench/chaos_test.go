package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestChaosShort runs `bench chaos` for a minute on the test models
// (30 s against mosquitto, 30 s against the embedded broker, a fault
// every 4 s: every kind at least once per broker), the runtime as a
// child didoedge built from this tree, everything on 127.0.0.1 and
// stopped by PID. Every seq the outbox assigned is delivered to both
// persistent subscribers or still pending in it, none twice with two
// event ids, none out of order, and the counts add up. RSS and
// goroutines are reported, not judged: a minute is too short.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of chaos")
	}
	if _, err := FindMosquitto(); err != nil {
		t.Fatalf("%v: bash scripts/deps.sh installs mosquitto", err)
	}
	dir := t.TempDir()
	self := filepath.Join(dir, "didoedge")
	build := exec.Command("go", "build", "-o", self, "../../../cmd/didoedge")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "out")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Chaos(ctx, ChaosOptions{ModelsDir: testModels(t), Out: out, Self: self, Duration: time.Minute,
		FaultEvery: 4 * time.Second, Warmup: 5 * time.Second, Sample: time.Second, Cameras: 2, FPS: 5, Seed: 7,
		UpdateInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.json", "report.md", "mosquitto/sub-0.jsonl", "embedded/runtime.log"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	if len(rep.Phases) != 2 {
		t.Fatalf("%d phases", len(rep.Phases))
	}
	var skipped []string
	for _, p := range rep.Phases {
		for k, n := range p.SkippedCounts {
			skipped = append(skipped, fmt.Sprintf("%s: %d %s skipped (%s)", p.Broker, n, k, p.DiskFault))
		}
		t.Logf("%s: produced %d, starts %d, faults %v, RSS %+.1f%%, goroutines %+.1f%%", p.Broker, p.Produced, p.RuntimeStarts, p.FaultCounts, 100*p.RSSChange, 100*p.GoroutineChange)
		if p.Produced == 0 {
			t.Errorf("%s: no event produced", p.Broker)
		}
		if len(p.UnexpectedExits) > 0 {
			t.Errorf("%s: unexpected runtime exits %v", p.Broker, p.UnexpectedExits)
		}
		for _, k := range FaultKinds {
			if p.FaultCounts[k] == 0 && p.SkippedCounts[k] == 0 {
				t.Errorf("%s: fault %s never ran", p.Broker, k)
			}
		}
		for _, f := range p.Faults {
			if f.Error != "" {
				t.Errorf("%s: fault %+v", p.Broker, f)
			}
		}
		// SIGKILLs and (embedded) broker restarts start the runtime again.
		if want := 1 + p.FaultCounts[FaultKill]; p.RuntimeStarts < want {
			t.Errorf("%s: %d runtime starts, want at least %d", p.Broker, p.RuntimeStarts, want)
		}
		for _, s := range p.Subscribers {
			if len(s.Lost) != 0 || len(s.Reused) != 0 || s.OutOfOrder != 0 || s.Beyond != 0 || s.BadFormat != 0 {
				t.Errorf("%s %s: lost %v, reused %v, out of order %d, beyond %d, bad %d", p.Broker, s.ClientID, s.Lost, s.Reused, s.OutOfOrder, s.Beyond, s.BadFormat)
			}
			// Every seq 1..produced is delivered or still pending (no loss
			// above), and every message is a first delivery or a duplicate.
			if uint64(s.Delivered+s.Pending) != p.Produced || s.Pending > p.PendingAtEnd || s.Messages != s.Delivered+s.Duplicates {
				t.Errorf("%s %s: delivered %d + pending %d != produced %d, or messages %d != delivered + duplicates %d",
					p.Broker, s.ClientID, s.Delivered, s.Pending, p.Produced, s.Messages, s.Duplicates)
			}
		}
	}
	// A fault this machine could not inject leaves the test unproven:
	// it must not pass (the checks above still fail it on their own).
	if len(skipped) > 0 {
		t.Skipf("faults not injected, so the run proves nothing of them: %v", skipped)
	}
}

// A disk_full fault skipped for want of a tmpfs is counted as skipped,
// not as a fault that ran, and the report says so.
func TestCountFaultsSkipped(t *testing.T) {
	faults := []Fault{{Kind: FaultKill}, {Kind: FaultDisk, Detail: "skipped: no tmpfs", Skipped: true}, {Kind: FaultKill}, {Kind: FaultDisk, Skipped: true}}
	injected, skipped := countFaults(faults)
	if injected[FaultKill] != 2 || injected[FaultDisk] != 0 || skipped[FaultDisk] != 2 || len(skipped) != 1 {
		t.Fatalf("injected %v, skipped %v; want 2 kills injected, 2 disk_full skipped", injected, skipped)
	}
	rep := &ChaosReport{Phases: []PhaseReport{{Broker: "embedded", FaultCounts: injected, SkippedCounts: skipped,
		Subscribers: []SubscriberReport{{ClientID: "sub-0"}}}}}
	if md := rep.Markdown(); !strings.Contains(md, "disk_full 0 (2 skipped)") {
		t.Fatalf("report does not say the disk faults were skipped:\n%s", md)
	}
}

// TestAnalyzeDeliveries checks the accounting on arrival orders worked
// out by hand.
func TestAnalyzeDeliveries(t *testing.T) {
	msg := func(seq uint64, id string) received { return received{Seq: seq, ID: id} }
	cases := []struct {
		name     string
		msgs     []received
		produced uint64
		pending  map[uint64]bool
		want     SubscriberReport
	}{
		{"in order", []received{msg(1, "a"), msg(2, "b"), msg(3, "c")}, 3, nil,
			SubscriberReport{Messages: 3, Delivered: 3}},
		{"redelivered after a crash", []received{msg(1, "a"), msg(2, "b"), msg(2, "b"), msg(3, "c")}, 3, nil,
			SubscriberReport{Messages: 4, Delivered: 3, Duplicates: 1}},
		{"a seq reused", []received{msg(1, "a"), msg(2, "b"), msg(2, "x")}, 2, nil,
			SubscriberReport{Messages: 3, Delivered: 2, Duplicates: 1, Reused: []uint64{2}}},
		{"out of order", []received{msg(1, "a"), msg(3, "c"), msg(2, "b"), msg(4, "d")}, 4, nil,
			SubscriberReport{Messages: 4, Delivered: 4, OutOfOrder: 1}},
		{"lost and pending", []received{msg(1, "a"), msg(4, "d")}, 6, map[uint64]bool{5: true, 6: true},
			SubscriberReport{Messages: 2, Delivered: 2, OutOfOrder: 0, Lost: []uint64{2, 3}, Pending: 2}},
		{"above the last seq", []received{msg(1, "a"), msg(2, "b")}, 1, nil,
			SubscriberReport{Messages: 2, Delivered: 2, Beyond: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := analyzeDeliveries("s", c.msgs, 0, c.produced, c.pending)
			c.want.ClientID = "s"
			if c.want.Reused == nil {
				c.want.Reused = []uint64{}
			}
			if c.want.Lost == nil {
				c.want.Lost = []uint64{}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// TestRSSWindows: samples before the warm-up or soon after a restart are
// left out; the windows are a sixth of the rest, compared by median.
func TestRSSWindows(t *testing.T) {
	var s []ChaosSample
	for i := range 70 { // one a second; a restart at 40 s
		since := float64(i)
		if i >= 40 {
			since = float64(i - 40)
		}
		rss := int64(100 + i) // grows 1 a second
		s = append(s, ChaosSample{AtSec: float64(i), SinceStartSec: since, RSSBytes: rss, Goroutines: 10})
	}
	first, last := rssWindows(s, 10, 5, 0)
	// Used: 10..39 and 45..69: span 59 s, window 59/6 s.
	if first.FromSec != 10 || last.ToSec != 69 || first.Samples != 10 || last.Samples != 10 {
		t.Fatalf("first %+v last %+v", first, last)
	}
	if first.RSSBytes != 114 || last.RSSBytes != 164 || first.Goroutines != 10 || last.Goroutines != 10 {
		t.Fatalf("first %+v last %+v", first, last)
	}
}
