package stream

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/testmodels"

	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/internal/mcapcheck"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// BenchmarkPipelineRecording15fps runs the pipeline in real time on a
// 640x192 camera at 15 fps (rendered outdoor frames, looped) with the test
// models and the recorder at its defaults (continuous, JPEG q90, all
// maps), 45 frames per iteration. It reports the frames the pipeline
// dropped (latest-frame policy: any delay the recorder caused would show
// here), the frames the recorder dropped, and the recording's cost per
// frame (recorder thread CPU + hand-over) against the pipeline's own
// per-frame processing. The test models are tiny (64x32), so the ratio is
// far above the reference models' (`didoedge bench latency --record`).
func BenchmarkPipelineRecording15fps(b *testing.B) {
	requireORT(b)
	s := newTestSetup(b, "quiet.yaml", testmodels.ConfigZones)
	text := fmt.Sprintf(testmodels.ConfigYAML, "  url: rtsp://127.0.0.1:1/unused", "quiet.yaml", testmodels.ConfigZones) + "record: {mode: continuous, dir: rec}\n"
	if err := os.WriteFile(s.config, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	const w, h = 640, 192
	r, err := sim.NewRenderer(sim.Config{World: sim.WorldOutdoor, Width: w, Height: h, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	var pics [][]uint8
	for i := range 3 {
		f := sim.NewFrame(w, h)
		if err := r.Render(i*10, f); err != nil {
			b.Fatal(err)
		}
		pics = append(pics, append([]uint8(nil), f.RGB...))
	}
	var pipeDropped, recDropped, written, bytes uint64
	var recCost, pipeCost time.Duration
	var wall time.Duration
	b.ResetTimer()
	for range b.N {
		cfg, err := runconfig.Load(s.config)
		if err != nil {
			b.Fatal(err)
		}
		cfg.AlertsConfig.Outbox.Dir = b.TempDir()
		cfg.Record.Dir = b.TempDir()
		src := camera.NewMailbox()
		ctx, cancel := context.WithCancel(context.Background())
		p, err := New(ctx, cfg, Options{Source: src})
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		t0 := time.Now()
		tick := time.NewTicker(time.Second / 15)
		f := camera.Frame{SourceID: "front", Width: w, Height: h}
		for k := 1; k <= 45; k++ {
			<-tick.C
			f.RGB = append(f.RGB[:0], pics[k%3]...)
			f.Seq, f.Capture, f.Decoded = uint64(k), time.Now(), time.Now()
			src.Publish(&f)
		}
		tick.Stop()
		// The last frame is taken within a frame period.
		deadline := time.Now().Add(5 * time.Second)
		for p.Metrics().Camera(0).Frames.Load()+p.Metrics().Camera(0).Dropped.Load() < 45 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		wall += time.Since(t0)
		src.Close(nil)
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		m := p.Metrics().Camera(0)
		st, call, _ := p.RecordStats()
		b.StopTimer()
		files, _ := filepath.Glob(filepath.Join(cfg.Record.Dir, "rec-*.mcap"))
		for _, f := range files {
			mcapcheck.Check(b, f) // Foxglove's reader reads what the benchmark wrote
		}
		if len(files) != 1 {
			b.Fatalf("recordings %v, want one", files)
		}
		b.StartTimer()
		pipeDropped += 45 - m.Frames.Load()
		recDropped += st.FramesDropped
		written += st.FramesWritten
		bytes += st.BytesWritten
		recCost += st.WorkerCPU + call
		for stage := StagePreprocess; stage <= StageAlerts; stage++ {
			pipeCost += time.Duration(m.Stages[stage].Count()) * m.Stages[stage].Mean()
		}
	}
	b.ReportMetric(float64(pipeDropped)/float64(b.N), "pipeline-dropped/45")
	b.ReportMetric(float64(recDropped)/float64(b.N), "record-dropped/45")
	if written > 0 {
		b.ReportMetric(float64(recCost.Microseconds())/1000/float64(written), "record-ms/frame")
		b.ReportMetric(float64(pipeCost.Microseconds())/1000/float64(written), "pipeline-ms/frame")
		b.ReportMetric(float64(bytes)/wall.Seconds()/1e6, "MB/s")
	}
}
