package nn

import (
	"sync/atomic"
	"testing"
	"time"
)

// countingRunner counts how often each unit of a pass ran.
type countingRunner struct{ runs []atomic.Int32 }

func (c *countingRunner) runTiles(_, _, lo, hi int) {
	for u := lo; u < hi; u++ {
		c.runs[u].Add(1)
	}
}

// TestPoolSpuriousWake: a wake-up token that arrives without a new pass
// (as one did under qemu-aarch64) runs nothing and checks nothing in: the
// worker goes back to sleep, and the passes before and after it run every
// unit exactly once.
func TestPoolSpuriousWake(t *testing.T) {
	p := newWorkerPool(3)
	defer p.close()
	r := &countingRunner{runs: make([]atomic.Int32, 64)}
	pass := func(want int32) {
		t.Helper()
		done := make(chan struct{})
		go func() { p.run(r, 0, len(r.runs), 1); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("pass %d did not finish (left %d)", want, p.left.Load())
		}
		for u := range r.runs {
			if n := r.runs[u].Load(); n != want {
				t.Fatalf("after pass %d unit %d ran %d times", want, u, n)
			}
		}
	}
	pass(1)
	asleep := func(w int) bool {
		deadline := time.Now().Add(5 * time.Second)
		for !p.ws[w].asleep.Load() {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(time.Millisecond)
		}
		return true
	}
	for w := 1; w < p.size; w++ {
		if !asleep(w) {
			t.Fatalf("worker %d never went to sleep", w)
		}
	}
	const sentinel = 100
	p.left.Store(sentinel)
	for w := 1; w < p.size; w++ {
		p.ws[w].wake <- struct{}{} // a token without a new pass
	}
	time.Sleep(50 * time.Millisecond)
	if got := p.left.Load(); got != sentinel {
		t.Fatalf("spurious wake-ups checked in: left %d, want %d", got, sentinel)
	}
	for w := 1; w < p.size; w++ {
		if !asleep(w) || len(p.ws[w].wake) != 0 {
			t.Fatalf("worker %d: asleep %v with %d tokens after a spurious wake-up", w, p.ws[w].asleep.Load(), len(p.ws[w].wake))
		}
	}
	pass(2)
	p.done <- struct{}{} // a stale token for the caller: the next pass still waits for every worker
	pass(3)
}
