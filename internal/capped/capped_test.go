package capped

import (
	"strings"
	"testing"
	"time"
)

// A child that allocates past its cap fails, and the parent says so; the
// cap is what stops it (the allocation would otherwise succeed on a test
// machine: 2 GiB, of which only the first page is touched).
func TestChildOverCapFails(t *testing.T) {
	if testingChild() {
		b := make([]byte, 2<<30)
		b[0] = 1
		t.Log(len(b))
		return
	}
	res, err := Run(t, Limits{VirtualKB: 1_000_000, Timeout: 30 * time.Second})
	if err == nil {
		t.Fatalf("a child allocating 2 GiB under a 1 GB cap passed:\n%s", res.Output)
	}
	if !strings.Contains(res.Output, "out of memory") {
		t.Fatalf("child failed without running out of memory: %v\n%s", err, res.Output)
	}
}

// A child within its caps passes, and its peak RSS is measured: the child
// touches 64 MiB, so its peak is at least that.
func TestChildWithinCapPasses(t *testing.T) {
	if testingChild() {
		b := make([]byte, 64<<20)
		for i := range b {
			b[i] = 1
		}
		t.Log(len(b))
		return
	}
	res, err := Run(t, Default())
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Output)
	}
	if res.MaxRSSKB < 64<<10 {
		t.Fatalf("child's peak RSS %d KiB, it touched 64 MiB", res.MaxRSSKB)
	}
}

func TestRunPattern(t *testing.T) {
	if got, want := runPattern("TestA/b.c"), `^TestA$/^b\.c$`; got != want {
		t.Fatalf("runPattern = %q, want %q", got, want)
	}
}

func testingChild() bool { return childName() != "" }
