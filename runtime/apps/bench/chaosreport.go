package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ChaosReport is `bench chaos`'s result (report.json).
type ChaosReport struct {
	Duration    string        `json:"duration"`
	FaultEvery  string        `json:"fault_every"`
	Warmup      string        `json:"warmup"`
	Cameras     int           `json:"cameras"`
	FPS         float64       `json:"fps"`
	Seed        int64         `json:"seed"`
	Subscribers int           `json:"subscribers"`
	Phases      []PhaseReport `json:"phases"`
	// Pass: every phase passed its goal check.
	Pass bool `json:"pass"`
}

// SubscriberReport is one persistent subscriber's record against the
// seqs the runtime assigned.
type SubscriberReport struct {
	ClientID string `json:"client_id"`
	// Messages is every event message received; Delivered the distinct
	// seqs among them; Duplicates the messages of a seq already received
	// (same event id).
	Messages   int `json:"messages"`
	Delivered  int `json:"delivered"`
	Duplicates int `json:"duplicates"`
	// Reused is the seqs received with more than one event id.
	Reused []uint64 `json:"reused"`
	// OutOfOrder is the first arrivals of a seq below one already
	// received: what the dedupe rule (drop seq <= highest processed) would
	// discard.
	OutOfOrder int `json:"out_of_order"`
	// Lost is every seq in 1..produced neither delivered nor still
	// pending in the outbox (so acknowledged by it or never stored: the
	// outbox stores every seq it assigns).
	Lost []uint64 `json:"lost"`
	// Pending is the seqs not delivered and still pending in the outbox
	// at the end (delivered at the next start; not lost).
	Pending int `json:"pending_undelivered"`
	// Beyond is seqs received above the outbox's last seq.
	Beyond    int `json:"beyond_last_seq"`
	BadFormat int `json:"bad_payloads"`
}

// Window is the median RSS and goroutines over a span of the phase.
type Window struct {
	FromSec    float64 `json:"from_s"`
	ToSec      float64 `json:"to_s"`
	Samples    int     `json:"samples"`
	RSSBytes   float64 `json:"rss_bytes_median"`
	Goroutines float64 `json:"goroutines_median"`
}

// PhaseReport is one broker's run.
type PhaseReport struct {
	Broker        string  `json:"broker"`
	DurationSec   float64 `json:"duration_s"`
	DiskFault     string  `json:"disk_fault"` // tmpfs, or why none
	RuntimeStarts int     `json:"runtime_starts"`
	// UnexpectedExits are the runtime's exits the script did not cause.
	UnexpectedExits []string `json:"unexpected_exits"`
	Faults          []Fault  `json:"faults"`
	// FaultCounts are the faults injected by kind; SkippedCounts those
	// the machine could not inject (disk_full without a tmpfs).
	FaultCounts   map[string]int `json:"fault_counts"`
	SkippedCounts map[string]int `json:"skipped_counts,omitempty"`
	// Produced is the outbox's last seq (every seq the runtime assigned,
	// from 1: a fresh outbox); AckedSeq its acknowledged position;
	// PendingAtEnd the seqs still in it after the final stop.
	Produced     uint64             `json:"produced"`
	AckedSeq     uint64             `json:"acked_seq"`
	PendingAtEnd int                `json:"pending_at_end"`
	Subscribers  []SubscriberReport `json:"subscribers"`
	Samples      []ChaosSample      `json:"samples"`
	First        Window             `json:"first_window"`
	Last         Window             `json:"last_window"`
	// RSSChange and GoroutineChange are last / first - 1.
	RSSChange       float64  `json:"rss_change"`
	GoroutineChange float64  `json:"goroutine_change"`
	Failures        []string `json:"failures"`
	Pass            bool     `json:"pass"`
}

func (ph *chaosPhase) report(obDir string) (*PhaseReport, error) {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	r := &PhaseReport{Broker: ph.broker, DurationSec: time.Since(ph.t0).Seconds(), RuntimeStarts: ph.starts,
		UnexpectedExits: ph.exits, Faults: ph.faults, Samples: ph.samples, FaultCounts: map[string]int{}}
	r.DiskFault = "tmpfs " + fmt.Sprint(ph.o.TmpfsBytes) + " bytes"
	if !ph.tmpfs {
		r.DiskFault = "none (no tmpfs: not root or mount refused)"
	}
	r.FaultCounts, r.SkippedCounts = countFaults(ph.faults)
	last, acked, pending, err := outboxState(obDir)
	if err != nil {
		return nil, fmt.Errorf("read the outbox after the run: %w", err)
	}
	r.Produced, r.AckedSeq, r.PendingAtEnd = last, acked, len(pending)
	for _, s := range ph.subs {
		msgs, bad, _ := s.snapshot()
		r.Subscribers = append(r.Subscribers, analyzeDeliveries(s.id, msgs, bad, last, pending))
	}
	r.First, r.Last = rssWindows(ph.samples, ph.o.Warmup.Seconds(), ph.o.RestartWarmup.Seconds(), ph.o.Window.Seconds())
	r.RSSChange = ratioChange(r.Last.RSSBytes, r.First.RSSBytes)
	r.GoroutineChange = ratioChange(r.Last.Goroutines, r.First.Goroutines)
	r.check()
	return r, nil
}

func ratioChange(last, first float64) float64 {
	if first == 0 { // no window: check reports it (JSON has no NaN)
		return 0
	}
	return last/first - 1
}

// analyzeDeliveries compares one subscriber's messages, in arrival
// order, with the seqs 1..produced the outbox assigned.
func analyzeDeliveries(id string, msgs []received, bad int, produced uint64, pending map[uint64]bool) SubscriberReport {
	r := SubscriberReport{ClientID: id, Messages: len(msgs), BadFormat: bad, Reused: []uint64{}, Lost: []uint64{}}
	ids := map[uint64]string{}
	reused := map[uint64]bool{}
	var highest uint64
	for _, m := range msgs {
		if prev, ok := ids[m.Seq]; ok {
			if prev != m.ID && !reused[m.Seq] {
				reused[m.Seq] = true
				r.Reused = append(r.Reused, m.Seq)
			}
			r.Duplicates++
			continue
		}
		ids[m.Seq] = m.ID
		if m.Seq < highest {
			r.OutOfOrder++
		}
		highest = max(highest, m.Seq)
		if m.Seq > produced {
			r.Beyond++
		}
	}
	r.Delivered = len(ids)
	for s := uint64(1); s <= produced; s++ {
		if _, ok := ids[s]; !ok {
			if pending[s] {
				r.Pending++
			} else {
				r.Lost = append(r.Lost, s)
			}
		}
	}
	slices.Sort(r.Reused)
	return r
}

// rssWindows returns the median RSS and goroutines over the first and
// the last window of the samples taken after the warm-up, leaving out
// samples of a runtime started less than restartWarmup before (a
// restarted process is loading its models again). Medians: the
// goroutine count follows the fault of the moment (a camera or the
// broker away has fewer), which a window's median ignores while a leak
// moves it. window 0: 10 min when at least 20 min follow the warm-up,
// else a sixth of that span.
func rssWindows(samples []ChaosSample, warmup, restartWarmup, window float64) (first, last Window) {
	var use []ChaosSample
	for _, s := range samples {
		if s.AtSec >= warmup && s.SinceStartSec >= restartWarmup {
			use = append(use, s)
		}
	}
	if len(use) == 0 {
		return
	}
	from, to := use[0].AtSec, use[len(use)-1].AtSec
	if window == 0 {
		window = (to - from) / 6
		if to-from >= 20*60 {
			window = 10 * 60
		}
	}
	median := func(lo, hi float64) Window {
		w := Window{FromSec: lo, ToSec: hi}
		var rss, gr []float64
		for _, s := range use {
			if s.AtSec >= lo && s.AtSec <= hi {
				rss = append(rss, float64(s.RSSBytes))
				gr = append(gr, float64(s.Goroutines))
			}
		}
		w.Samples = len(rss)
		if w.Samples > 0 {
			w.RSSBytes, w.Goroutines = quantileF(rss, 0.5), quantileF(gr, 0.5)
		}
		return w
	}
	return median(from, from+window), median(to-window, to)
}

// check applies the goal: 0 lost, 0 reused, 0 out of order, every
// delivery accounted for, RSS and goroutines of the last window within
// 5 % of the first.
func (r *PhaseReport) check() {
	fail := func(format string, a ...any) { r.Failures = append(r.Failures, fmt.Sprintf(format, a...)) }
	if r.Produced == 0 {
		fail("no event produced")
	}
	for _, s := range r.Subscribers {
		if len(s.Lost) > 0 {
			fail("%s: %d seqs lost (first %v)", s.ClientID, len(s.Lost), s.Lost[:min(len(s.Lost), 10)])
		}
		if len(s.Reused) > 0 {
			fail("%s: %d seqs reused", s.ClientID, len(s.Reused))
		}
		if s.OutOfOrder > 0 {
			fail("%s: %d out of order after de-duplication", s.ClientID, s.OutOfOrder)
		}
		if s.Beyond > 0 {
			fail("%s: %d seqs above the outbox's last seq", s.ClientID, s.Beyond)
		}
		if uint64(s.Delivered-s.Beyond+len(s.Lost)+s.Pending) != r.Produced {
			fail("%s: delivered %d + lost %d + pending %d do not account for %d produced", s.ClientID, s.Delivered-s.Beyond, len(s.Lost), s.Pending, r.Produced)
		}
	}
	if r.First.Samples == 0 || r.Last.Samples == 0 {
		fail("no RSS/goroutine samples after the warm-up")
	} else {
		if math.Abs(r.RSSChange) > 0.05 {
			fail("RSS changed %+.1f%% (last window against first)", 100*r.RSSChange)
		}
		if math.Abs(r.GoroutineChange) > 0.05 {
			fail("goroutines changed %+.1f%% (last window against first)", 100*r.GoroutineChange)
		}
	}
	r.Pass = len(r.Failures) == 0
}

func (rep *ChaosReport) finish() {
	rep.Pass = len(rep.Phases) > 0
	for _, p := range rep.Phases {
		rep.Pass = rep.Pass && p.Pass
	}
}

func (rep *ChaosReport) write(dir string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(rep.Markdown()), 0o644)
}

// Markdown is the report's summary.
func (rep *ChaosReport) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# bench chaos\n\n%s in all, a fault every %s (seed %d), %d simulated cameras at %g fps, %d persistent subscribers (clean session off, QoS 1), warm-up %s.\n\n",
		rep.Duration, rep.FaultEvery, rep.Seed, rep.Cameras, rep.FPS, rep.Subscribers, rep.Warmup)
	b.WriteString("| broker | time | faults | runtime starts | unexpected exits | produced | subscriber | delivered | duplicates | lost | reused | out of order | RSS first → last | goroutines first → last | pass |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range rep.Phases {
		var fc []string
		for _, k := range FaultKinds {
			s := fmt.Sprintf("%s %d", k, p.FaultCounts[k])
			if n := p.SkippedCounts[k]; n > 0 {
				s += fmt.Sprintf(" (%d skipped)", n)
			}
			fc = append(fc, s)
		}
		for _, s := range p.Subscribers {
			fmt.Fprintf(&b, "| %s | %.0f s | %s | %d | %d | %d | %s | %d | %d | %d | %d | %d | %.1f → %.1f MiB (%+.1f%%) | %.0f → %.0f (%+.1f%%) | %t |\n",
				p.Broker, p.DurationSec, strings.Join(fc, ", "), p.RuntimeStarts, len(p.UnexpectedExits), p.Produced, s.ClientID,
				s.Delivered, s.Duplicates, len(s.Lost), len(s.Reused), s.OutOfOrder,
				p.First.RSSBytes/(1<<20), p.Last.RSSBytes/(1<<20), 100*p.RSSChange, p.First.Goroutines, p.Last.Goroutines, 100*p.GoroutineChange, p.Pass)
		}
	}
	b.WriteString("\n")
	for _, p := range rep.Phases {
		fmt.Fprintf(&b, "## %s\n\nDisk fault: %s. Outbox at the end: last seq %d, acknowledged %d, pending %d. Windows: first %.0f-%.0f s (%d samples), last %.0f-%.0f s (%d samples).\n\n",
			p.Broker, p.DiskFault, p.Produced, p.AckedSeq, p.PendingAtEnd, p.First.FromSec, p.First.ToSec, p.First.Samples, p.Last.FromSec, p.Last.ToSec, p.Last.Samples)
		for _, e := range p.UnexpectedExits {
			fmt.Fprintf(&b, "* unexpected runtime exit: %s\n", e)
		}
		for _, f := range p.Failures {
			fmt.Fprintf(&b, "* FAIL: %s\n", f)
		}
		if p.Pass {
			b.WriteString("* goal met: 0 lost, 0 reused, 0 out of order, RSS and goroutines within 5 %\n")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Overall: pass %t\n", rep.Pass)
	return b.String()
}

// countFaults counts the faults injected by kind, and apart from them
// those skipped (a disk_full without a tmpfs is no fault injected).
func countFaults(faults []Fault) (injected, skipped map[string]int) {
	injected = map[string]int{}
	for _, f := range faults {
		if f.Skipped {
			if skipped == nil {
				skipped = map[string]int{}
			}
			skipped[f.Kind]++
			continue
		}
		injected[f.Kind]++
	}
	return injected, skipped
}
