package profiling

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestProfiles: StartCPU writes a non-empty profile when stopped, and
// HeapPeak writes one within its first second; a path in a missing
// directory is an error naming the flag.
func TestProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu := filepath.Join(dir, "cpu.prof")
	stop, err := StartCPU(cpu)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if st, err := os.Stat(cpu); err != nil || st.Size() == 0 {
		t.Fatalf("cpu profile: %v, %v", st, err)
	}
	if _, err := StartCPU(filepath.Join(dir, "no", "cpu.prof")); err == nil {
		t.Fatal("StartCPU in a missing directory: no error")
	}
	heap := filepath.Join(dir, "heap.prof")
	stopHeap := HeapPeak(context.Background(), heap, slog.New(slog.DiscardHandler))
	keep := make([]byte, 8<<20) // a live heap above zero at the first sample
	deadline := time.Now().Add(5 * time.Second)
	for {
		if st, err := os.Stat(heap); err == nil && st.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no heap profile after 5 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopHeap()
	_ = keep[len(keep)-1]
}
