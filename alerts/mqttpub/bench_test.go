package mqttpub

import (
	"context"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
)

// BenchmarkServiceEvent is the sinks' share of the pipeline's alerts
// stage in `didoedge bench latency`, where every frame raises one event:
// an engine over a 4-pixel map (the assessment costs nothing here) whose
// one zone stays critical with an update event on every frame, delivered
// to the Service (event JSON, outbox append with its fsync, the zone's
// retained state: JSON and publish to the embedded broker). Sub-benchmark
// "no_sink" is the same engine without sinks (event construction only).
//
//	go test ./alerts/mqttpub -run '^$' -bench ServiceEvent -benchmem
func BenchmarkServiceEvent(b *testing.B) {
	cfg := serviceConfig(b)
	cfg.ZoneSet = alerts.ZoneSet{Zones: []alerts.ZoneSpec{{Name: "frame", Polygon: [][2]float64{{0, 0}, {1, 0}, {1, 1}, {0, 1}}}}}
	svc, err := Start(context.Background(), cfg.Topics(), cfg.ServiceConfig, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for !svc.Publisher().Connected() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	spec, err := cfg.EngineSpec("")
	if err != nil {
		b.Fatal(err)
	}
	spec.Config.UpdateInterval = time.Millisecond
	m := alerts.Maps{Width: 4, Height: 1, Epistemic: []float32{0.9, 0.9, 0.9, 0.9},
		Scale: []float32{0.1, 0.1, 0.1, 0.1}, Depth: []float32{50, 50, 50, 50}}
	for _, sc := range []struct {
		name string
		sink alerts.Sink
	}{{"no_sink", nil}, {"service", svc}} {
		b.Run(sc.name, func(b *testing.B) {
			eng, err := alerts.NewEngine(spec, sc.sink)
			if err != nil {
				b.Fatal(err)
			}
			f := alerts.Frame{Capture: time.Now()}
			b.ReportAllocs()
			for b.Loop() {
				f.Seq++
				f.Capture = f.Capture.Add(66 * time.Millisecond)
				if err := eng.Observe(f, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
