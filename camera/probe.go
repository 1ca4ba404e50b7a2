package camera

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// ProbeReport summarizes the frames a Probe received.
type ProbeReport struct {
	Codec         string
	Width, Height int
	Frames        int
	// FPS is measured from the capture timestamps of the received frames.
	FPS float64
	// Latencies are capture-to-decoded per frame, in arrival order.
	Latencies []time.Duration
	Dropped   uint64
	Events    []Event
}

// LatencyQuantile returns the q-quantile (0..1, nearest rank) of the latencies.
func (r ProbeReport) LatencyQuantile(q float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	s := slices.Clone(r.Latencies)
	slices.Sort(s)
	i := int(q*float64(len(s)-1) + 0.5)
	return s[min(max(i, 0), len(s)-1)]
}

// Probe connects to cfg.URL, decodes n frames (calling onFrame for each, if
// set) and reports codec, size, rate and latency. It gives up when ctx ends;
// the error then names the last fault the supervisor saw.
func Probe(ctx context.Context, cfg RTSPConfig, n int, onFrame func(*Frame)) (ProbeReport, error) {
	var rep ProbeReport
	if n <= 0 {
		return rep, fmt.Errorf("probe: frame count %d must be positive", n)
	}
	var mu sync.Mutex
	var lastFault string
	userEvent := cfg.OnEvent
	cfg.OnEvent = func(e Event) {
		mu.Lock()
		rep.Events = append(rep.Events, e)
		if e.Kind == EventFault {
			lastFault = e.Reason
		}
		mu.Unlock()
		if userEvent != nil {
			userEvent(e)
		}
	}
	src, err := NewRTSPSource(cfg)
	if err != nil {
		return rep, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { src.Run(runCtx); close(done) }()
	defer func() { cancel(); <-done }()

	var f Frame
	var first, last time.Time
	for rep.Frames < n {
		if err := src.Next(ctx, &f); err != nil {
			mu.Lock()
			reason := lastFault
			mu.Unlock()
			if reason != "" && errors.Is(err, ctx.Err()) {
				err = fmt.Errorf("%w (last fault: %s)", err, reason)
			}
			return rep, fmt.Errorf("probe %s after %d of %d frames: %w", src.ID(), rep.Frames, n, err)
		}
		if rep.Frames == 0 {
			first = f.Capture
		}
		last = f.Capture
		rep.Frames++
		rep.Codec, rep.Width, rep.Height = f.Codec, f.Width, f.Height
		rep.Latencies = append(rep.Latencies, f.Decoded.Sub(f.Capture))
		if onFrame != nil {
			onFrame(&f)
		}
	}
	if span := last.Sub(first); rep.Frames > 1 && span > 0 {
		rep.FPS = float64(rep.Frames-1) / span.Seconds()
	}
	rep.Dropped = src.Stats().Dropped
	mu.Lock()
	rep.Events = slices.Clone(rep.Events)
	mu.Unlock()
	return rep, nil
}

// Write prints the report: source (credentials redacted), codec, size,
// rate, frames and the capture-to-decoded latency percentiles.
func (r ProbeReport) Write(w io.Writer, url string) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	fmt.Fprintf(w, "source   %s\ncodec    %s\nsize     %dx%d\nfps      %.2f\nframes   %d (dropped %d)\nlatency  p50 %.2f ms  p90 %.2f ms  max %.2f ms\n",
		RedactURL(url), r.Codec, r.Width, r.Height, r.FPS, r.Frames, r.Dropped,
		ms(r.LatencyQuantile(0.5)), ms(r.LatencyQuantile(0.9)), ms(r.LatencyQuantile(1)))
}
