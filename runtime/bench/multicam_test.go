package bench

import (
	"context"
	"testing"
	"time"
)

// TestMulticamMeasures runs the multi-camera measurement and the bound
// briefly on the test models: every camera is served, the aggregate is
// the cameras' sum, and the figures are consistent.
func TestMulticamMeasures(t *testing.T) {
	dir := testModels(t)
	o := MulticamOptions{ModelsDir: dir, Cameras: 3, Duration: 2 * time.Second, Warmup: time.Second, Frames: 2}
	run, err := MulticamWithBound(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	r := &run.Result
	if b := (run.BoundBefore.FPS + run.BoundAfter.FPS) / 2; run.Ratio <= 0 || run.Ratio-r.AggregateFPS/b > 1e-9 || r.AggregateFPS/b-run.Ratio > 1e-9 {
		t.Fatalf("ratio %g, aggregate %g, bounds %g and %g", run.Ratio, r.AggregateFPS, run.BoundBefore.FPS, run.BoundAfter.FPS)
	}
	if len(r.PerCamera) != 3 || r.PerCamera[0].Name != "front" || r.PerCamera[1].Name != "left" || r.PerCamera[2].Name != "right" {
		t.Fatalf("cameras %+v", r.PerCamera)
	}
	var sum float64
	for _, c := range r.PerCamera {
		if c.Frames == 0 {
			t.Fatalf("camera %s not served: %+v", c.Name, r)
		}
		sum += c.FPS
	}
	if d := sum - r.AggregateFPS; d > 1e-9 || d < -1e-9 {
		t.Fatalf("aggregate %g is not the sum of the cameras' %g", r.AggregateFPS, sum)
	}
	if r.LatencyP50 <= 0 || r.LatencyP99 < r.LatencyP50 || r.RSSBytes <= 0 || r.Provider != "cpu" {
		t.Fatalf("figures %+v", r)
	}
	b, err := InferenceBound(context.Background(), o, 3)
	if err != nil {
		t.Fatal(err)
	}
	if b.Frames < 10 || b.FPS <= 0 || b.MeanTime <= 0 {
		t.Fatalf("bound %+v", b)
	}
}
