package bench

import (
	"context"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/testmodels"
)

const testH, testW = 32, 64

// testModels writes seeded random-weight models in the reference layout
// (internal/testmodels.WriteReference) and returns their directory.
func testModels(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	testmodels.WriteReference(t, dir)
	return dir
}

// TestLatencyMeasures runs the latency measurement briefly: every
// assessed frame's event reaches the subscriber, and the latency of a
// frame can never be below its own inference time.
func TestLatencyMeasures(t *testing.T) {
	r, err := Latency(context.Background(), Options{ModelsDir: testModels(t), Width: testW, Height: testH,
		FPS: 15, Duration: 3 * time.Second, Warmup: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.Frames < 10 {
		t.Fatalf("only %d frames measured in 3 s at 15 fps", r.Frames)
	}
	if r.LatencyP50 < r.InferP50 || r.Ratio < 1 || r.LatencyP99 < r.LatencyP50 {
		t.Fatalf("inconsistent figures: %+v", r)
	}
	if r.Provider != "cpu" {
		t.Fatalf("provider %q", r.Provider)
	}
}

// TestSoakShort is the CI version of `didoedge bench soak`: 20 s through
// fog and indoor phases; the goroutine count stays put and RSS does not
// keep growing.
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("20 s soak skipped in -short mode")
	}
	r, err := Soak(context.Background(), Options{ModelsDir: testModels(t), Width: testW, Height: testH,
		FPS: 15, Duration: 20 * time.Second, Warmup: 4 * time.Second}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Frames < 50 {
		t.Fatalf("only %d frames in 20 s", r.Frames)
	}
	if d := r.EndGoroutines - r.BaseGoroutines; d < -3 || d > 3 {
		t.Fatalf("goroutines %d -> %d", r.BaseGoroutines, r.EndGoroutines)
	}
	// Bounded growth: after the warm-up the heap is steady; allow 10% for
	// allocator noise in a 20 s run (the 10-minute soak asserts 5%).
	if r.Growth > 0.10 {
		t.Fatalf("RSS grew %.1f%% (%d -> %d bytes)", 100*r.Growth, r.BaseRSS, r.EndRSS)
	}
}
