package bench

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestMulticamMeasures runs the multi-camera measurement and the bound
// briefly on the test models: every camera is served, the aggregate is
// the cameras' sum, and the figures are consistent.
func TestMulticamMeasures(t *testing.T) {
	dir := testModels(t)
	for _, fps := range []float64{0, 30} { // free-running cameras, and 30 fps cameras
		t.Run(fmt.Sprintf("fps %g", fps), func(t *testing.T) { multicamMeasures(t, dir, fps, false) })
	}
	// Dynamic-batch copies of the models with pipeline.batch_size 3: the 3
	// cameras run as batches of 3, in the pipeline and in the bound (the
	// CPU provider's default is one frame per run).
	t.Run("dynamic batch", func(t *testing.T) { multicamMeasures(t, dir, 0, true) })
}

func multicamMeasures(t *testing.T, dir string, fps float64, dynamic bool) {
	o := MulticamOptions{ModelsDir: dir, Cameras: 3, Duration: 2 * time.Second, Warmup: time.Second, Frames: 2, FPS: fps, Slices: 2, DynamicBatch: dynamic}
	wantBatch := 1
	if dynamic {
		o.BatchSize, wantBatch = 3, 3
	}
	r, err := Multicam(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if r.BoundFPS <= 0 || r.Ratio <= 0 || r.Ratio-r.AggregateFPS/r.BoundFPS > 1e-9 || r.AggregateFPS/r.BoundFPS-r.Ratio > 1e-9 {
		t.Fatalf("ratio %g, aggregate %g, bound %g", r.Ratio, r.AggregateFPS, r.BoundFPS)
	}
	// The cameras' pauses during the bound's slices are not drops: at
	// 30 fps offered and far more served, nothing is dropped.
	for _, c := range r.PerCamera {
		if c.Dropped > c.Frames/2 {
			t.Fatalf("camera %s: %d dropped of %d", c.Name, c.Dropped, c.Frames)
		}
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
	if r.LatencyP50 <= 0 || r.LatencyP99 < r.LatencyP50 || r.RSSBytes <= 0 || r.Provider != "cpu" || r.BatchSize != wantBatch {
		t.Fatalf("figures %+v", r)
	}
	b, err := InferenceBound(context.Background(), o, 3)
	if err != nil {
		t.Fatal(err)
	}
	if b.Frames < 10 || b.FPS <= 0 || b.MeanTime <= 0 || b.BatchSize != wantBatch {
		t.Fatalf("bound %+v", b)
	}
}
