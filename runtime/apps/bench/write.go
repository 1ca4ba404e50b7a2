package bench

import (
	"fmt"
	"io"
	"time"
)

// Write prints the report: frames, latency percentiles and their ratio to
// inference, the runtime path, the stage means and, when recording
// (recFormat), the recording's cost.
func (r *LatencyReport) Write(w io.Writer, recFormat string) {
	fmt.Fprintf(w, "frames measured %d, assessed %.2f fps, dropped %d (latest-frame policy), provider %s\n", r.Frames, r.FPS, r.Dropped, r.Provider)
	fmt.Fprintf(w, "capture -> MQTT subscriber: p50 %v  p99 %v\n", r.LatencyP50.Round(time.Microsecond), r.LatencyP99.Round(time.Microsecond))
	fmt.Fprintf(w, "inference (depth + AuxUE): p50 %v  p99 %v\n", r.InferP50.Round(time.Microsecond), r.InferP99.Round(time.Microsecond))
	fmt.Fprintf(w, "ratio latency/inference (p50): %.3f\n", r.Ratio)
	fmt.Fprintf(w, "runtime path (pipeline takes the frame -> subscriber): p50 %v  p99 %v  ratio to inference (p50) %.3f\n",
		r.RuntimeP50.Round(time.Microsecond), r.RuntimeP99.Round(time.Microsecond), r.RuntimeRatio)
	fmt.Fprintf(w, "  of which pipeline takes the frame -> its event durable in the outbox, signalled to the publisher (frame to publish): p50 %v  ratio to inference (p50) %.3f; then -> subscriber (publisher, broker, client): p50 %v\n",
		r.QueuedP50.Round(time.Microsecond), r.QueuedRatio, r.HopP50.Round(time.Microsecond))
	fmt.Fprintf(w, "means: capture -> pipeline start %v, capture -> events queued %v; stages:", r.CameraMean.Round(time.Microsecond), r.PipelineMean.Round(time.Microsecond))
	for _, st := range []string{"camera", "preprocess", "depth", "auxue", "copy", "readout", "alerts"} {
		fmt.Fprintf(w, " %s %v", st, r.Stages[st].Round(time.Microsecond))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, copyLine(r.Stages["copy"], r.Stages["depth"]+r.Stages["auxue"]))
	if rr := r.Record; rr != nil {
		fmt.Fprintf(w, "recording (continuous, %s, all maps): frames written %d, dropped %d; %.2f MB/s, %.2f MB/frame\n",
			recFormat, rr.Written, rr.Dropped, rr.BytesPerSecond/1e6, rr.BytesPerFrame/1e6)
		fmt.Fprintf(w, "recording cost per frame: recorder thread CPU %v + pipeline hand-over %v; pipeline per-frame processing %v; ratio %.3f\n",
			rr.WorkerCPU.Round(time.Microsecond), rr.Call.Round(time.Microsecond), rr.Pipeline.Round(time.Microsecond), rr.Ratio)
	}
}

// Write prints one soak sample.
func (s SoakSample) Write(w io.Writer) {
	fmt.Fprintf(w, "%8v  rss %6.1f MiB  goroutines %4d  frames %7d  events %5d\n",
		s.Elapsed.Round(time.Second), float64(s.RSSBytes)/(1<<20), s.Goroutines, s.Frames, s.Events)
}

// Write prints the soak's RSS and goroutine growth.
func (r *SoakReport) Write(w io.Writer) {
	fmt.Fprintf(w, "rss %0.1f -> %0.1f MiB (max %0.1f): growth %+.2f%%; goroutines %d -> %d; %d frames\n",
		float64(r.BaseRSS)/(1<<20), float64(r.EndRSS)/(1<<20), float64(r.MaxRSS)/(1<<20), 100*r.Growth,
		r.BaseGoroutines, r.EndGoroutines, r.Frames)
}

// copyLine reports the host/device copies per frame (StageCopy) and their
// share of the inference (depth + AuxUE): on the device-resident path the
// image's upload and the maps' download; on the host path ONNX Runtime
// copies inside the runs and nothing is separate.
func copyLine(cp, inference time.Duration) string {
	if cp == 0 {
		return "host/device copies per frame: none separate (host tensors: ONNX Runtime copies inside the runs)"
	}
	ratio := 0.0
	if inference > 0 {
		ratio = float64(cp) / float64(inference)
	}
	return fmt.Sprintf("host/device copies per frame (device-resident tensors): %v, %.3f of inference (depth + AuxUE %v; goal <= 0.10)",
		cp.Round(time.Microsecond), ratio, inference.Round(time.Microsecond))
}
