package stream

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/runtime/domain"
	"github.com/didoedge/didoedge/runtime/infer"
)

// BenchmarkDomainMonitorCost runs the reference models (models/, with
// their training-domain record) on a rendered 640x192 outdoor frame and,
// per frame, the domain monitor's work as cameraPipe.observeDomain does it
// (statistics, distance, smoothing, the engine's domain step). It reports
// both times and their ratio measured in the same run: the monitor's cost
// as a percentage of the frame's model processing (goal: at most 2 %).
func BenchmarkDomainMonitorCost(b *testing.B) {
	requireORT(b)
	dir := filepath.Join("..", "..", "models")
	read := func(name, kind string) infer.IOSpec {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			b.Fatal(err)
		}
		s, err := infer.ParseIOSpecKind(data, name, kind)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	ds, as := read("depth.yaml", infer.KindDepth), read("auxue.yaml", infer.KindAuxUE)
	rec, err := as.DomainRecord()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	m, err := infer.OpenModels(ctx, infer.ModelsConfig{Depth: filepath.Join(dir, "depth.onnx"), DepthSpec: ds,
		AuxUE: filepath.Join(dir, "auxue.onnx"), AuxUESpec: as, AuxInputs: infer.DefaultAuxInputs(ds, as)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	r, err := sim.NewRenderer(sim.Config{World: sim.WorldOutdoor, Width: 640, Height: 192, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	f := sim.NewFrame(640, 192)
	if err := r.Render(10, f); err != nil {
		b.Fatal(err)
	}
	ex, err := domain.NewExtractor(rec.Layout)
	if err != nil {
		b.Fatal(err)
	}
	mon, err := domain.NewMonitor(domain.MonitorConfig{Window: time.Second, Threshold: 1})
	if err != nil {
		b.Fatal(err)
	}
	zones, _, err := alerts.ZoneSet{Grid: &alerts.GridSpec{Rows: 1, Cols: 2}}.Resolve("")
	if err != nil {
		b.Fatal(err)
	}
	engine, err := alerts.NewEngine(alerts.EngineSpec{Config: alerts.EngineConfig{Camera: "front"}, Zones: zones, Calibration: alerts.DefaultCalibration()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	sc, stats := rec.NewScratch(), make([]float64, rec.Layout.Dim())
	w, h := m.InputSize()
	var tm infer.StageTimes
	var frameT, domainT time.Duration
	capture := time.Unix(1000, 0)
	// The first frame sizes the models' buffers; the steady state allocates nothing.
	if _, _, err := m.InferTimed(ctx, f.RGB, 640, 192, &tm); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		maps, img, err := m.InferTimed(ctx, f.RGB, 640, 192, &tm)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		df := infer.DomainFrame(maps, img, w, h)
		if err := ex.Extract(&df, stats); err != nil {
			b.Fatal(err)
		}
		d, err := rec.Distance(stats, sc)
		if err != nil {
			b.Fatal(err)
		}
		capture = capture.Add(time.Second / 15)
		rd := mon.Observe(capture, d)
		if err := engine.ObserveDomain(alerts.Frame{Seq: uint64(i + 1), Capture: capture},
			alerts.DomainReading{Distance: rd.Distance, Smoothed: rd.Smoothed, Threshold: rd.Threshold, Window: rd.Window, Shifted: false}); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		frameT += t1.Sub(t0)
		domainT += t2.Sub(t1)
	}
	b.ReportMetric(float64(frameT.Nanoseconds())/float64(b.N), "frame-ns/op")
	b.ReportMetric(float64(domainT.Nanoseconds())/float64(b.N), "domain-ns/op")
	b.ReportMetric(100*float64(domainT)/float64(frameT), "domain-%")
}
