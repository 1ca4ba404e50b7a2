package capped

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv names the test a re-executed test binary is the child of.
const childEnv = "DIDOEDGE_CAPPED_CHILD"

// Limits of a child.
type Limits struct {
	// VirtualKB is the address-space cap (ulimit -v, KiB); a Go test
	// binary needs some hundred MB of address space to start.
	VirtualKB int
	// Timeout bounds the child's run.
	Timeout time.Duration
	// MaxRSSKB, when positive, fails the test if the child's peak
	// resident memory exceeded it.
	MaxRSSKB int64
}

// Default is the cap of the project's hostile-input probes: 3,000,000 KiB
// of address space (the child fails on a runaway allocation long before
// the machine swaps), 60 s, and the runtime's goal of under 300 MB
// resident.
func Default() Limits {
	return Limits{VirtualKB: 3_000_000, Timeout: 60 * time.Second, MaxRSSKB: 300 << 10}
}

// Result is what the parent learnt of its child.
type Result struct {
	MaxRSSKB int64
	Elapsed  time.Duration
	Output   string
}

// Child reports whether this process is the capped child of test t: then
// the test runs its probe and returns. Otherwise it re-executes the test
// binary for t alone under l, fails t when the child fails, times out or
// exceeds l.MaxRSSKB, and returns false (with the child's Result logged).
//
//	func TestProbe(t *testing.T) {
//		if !capped.Child(t, capped.Default()) {
//			return
//		}
//		... the probe, which may allocate without bound on a regression
//	}
func Child(t *testing.T, l Limits) bool {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		return true
	}
	res, err := Run(t, l)
	if err != nil {
		t.Fatalf("capped child of %s: %v\n%s", t.Name(), err, res.Output)
	}
	t.Logf("capped child of %s: peak RSS %d KiB, %v", t.Name(), res.MaxRSSKB, res.Elapsed.Round(time.Millisecond))
	return false
}

// Run re-executes the test binary for t alone under l and returns its
// result; the error is a failed, killed or too large child.
func Run(t *testing.T, l Limits) (Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), l.Timeout)
	defer cancel()
	args := []string{"-c", `ulimit -v "$1" && shift && exec "$@"`, "sh", fmt.Sprint(l.VirtualKB),
		os.Args[0], "-test.run=" + runPattern(t.Name()), "-test.count=1", "-test.v"}
	cmd := exec.CommandContext(ctx, "/bin/sh", args...)
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name(), "GOMAXPROCS=2")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	res := Result{Elapsed: time.Since(start), Output: string(out)}
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			res.MaxRSSKB = ru.Maxrss // Linux: KiB
		}
	}
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("still running after %v (killed)", l.Timeout)
	case err != nil:
		return res, fmt.Errorf("failed: %v", err)
	case !strings.Contains(res.Output, "--- PASS: "+t.Name()):
		return res, fmt.Errorf("did not run the test (no PASS line)")
	case l.MaxRSSKB > 0 && res.MaxRSSKB > l.MaxRSSKB:
		return res, fmt.Errorf("peak RSS %d KiB over the %d KiB goal", res.MaxRSSKB, l.MaxRSSKB)
	}
	return res, nil
}

// runPattern matches exactly the test (and subtest) named name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

func childName() string { return os.Getenv(childEnv) }
