package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/internal/lograte"
)

// cameraPipe is one camera of a pipeline: its source, its engine, its
// view of the shared models and its counters. Everything but the status,
// the snapshot and the counters is used from the scheduler goroutine only.
type cameraPipe struct {
	p       *Pipeline
	idx     int
	spec    CameraSpec
	src     camera.Source
	rtsp    *camera.RTSPSource
	models  *Models
	engine  *alerts.Engine
	metrics *CameraMetrics
	rl      *lograte.Limiter
	times   StageTimes

	// bufs[0] is the frame that circulates between the fetcher and the
	// scheduler; want hands it to the fetcher to fill.
	bufs    [1]camera.Frame
	want    chan *camera.Frame
	ended   bool         // the source ended (io.EOF)
	image   alerts.Image // the frame as the engine sees it (for snapshots)
	lastSeq uint64

	statusMu sync.Mutex
	status   []alerts.ZoneStatus // each zone after the last frame

	watchNS  atomic.Int64 // when a debug client last asked for data
	lastSnap time.Time
	snap     Snapshot
}

func (c *cameraPipe) openCamera(log *slog.Logger) error {
	s := c.spec.Source
	if s.Sequence != nil {
		src, err := camera.NewImageSequence(camera.SequenceConfig{Dir: s.Sequence.Dir, FPS: s.Sequence.FPS, Loop: s.Sequence.Loop, SourceID: c.spec.Name})
		if err != nil {
			return fmt.Errorf("%s.sequence: %w", c.spec.Key, err)
		}
		c.src = src
		return nil
	}
	src, err := camera.NewRTSPSource(camera.RTSPConfig{URL: s.URL, SourceID: c.spec.Name, UDP: s.UDP,
		StallTimeout: s.StallTimeout, BackoffMin: s.BackoffMin, BackoffMax: s.BackoffMax,
		RequestTimeout: s.RequestTimeout, Logger: log})
	if err != nil {
		return fmt.Errorf("%s.url: %w", c.spec.Key, err)
	}
	c.src, c.rtsp = src, src
	return nil
}

// registerMetrics connects the camera's source counters and health to its
// metrics.
func (c *cameraPipe) registerMetrics() {
	c.metrics.up = func() bool { ok, _ := c.framesHealth(time.Now()); return ok }
	if c.rtsp != nil {
		c.metrics.decodeErrors = func() uint64 { return c.rtsp.Stats().DecodeErrors }
		c.metrics.reconnects = func() uint64 { return c.rtsp.Stats().Failures }
	}
}

// ready reports whether the camera had a frame assessed within readyWindow.
func (c *cameraPipe) ready() bool {
	last := c.metrics.lastFrame.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < readyWindow
}

// process runs one frame through every stage. It allocates nothing unless
// the frame raises alert events or a debug client is watching.
func (c *cameraPipe) process(ctx context.Context, f *camera.Frame) {
	m := c.metrics
	t0 := time.Now()
	m.Stages[StageCamera].Observe(t0.Sub(f.Capture))
	if c.lastSeq != 0 && f.Seq > c.lastSeq+1 {
		m.Dropped.Add(f.Seq - c.lastSeq - 1)
	}
	c.lastSeq = f.Seq

	maps, rgb, err := c.models.infer(ctx, f.RGB, f.Width, f.Height, &c.times)
	if err != nil {
		if errors.Is(err, ErrInvalidOutput) {
			m.Invalid.Add(1)
			return
		}
		c.frameError(f.Seq, err)
		return
	}
	tm := &c.times
	m.Stages[StagePreprocess].Observe(tm.Preprocess)
	m.Stages[StageDepth].Observe(tm.Depth)
	m.Stages[StageAuxUE].Observe(tm.AuxUE)
	m.Stages[StageReadout].Observe(tm.Readout)
	t4 := time.Now()
	c.image = alerts.Image{Width: c.models.inW, Height: c.models.inH, RGB: rgb}
	if err := c.engine.Observe(alerts.Frame{Seq: f.Seq, Capture: f.Capture, Image: &c.image}, maps); err != nil {
		// The publisher logged each event not queued; this is the summary.
		c.rl.Warn("alerts frame "+c.spec.Name, "alerts: events of a frame not queued", "camera", c.spec.Name, "frame", f.Seq, "err", err)
	}
	c.p.rec.frame(c.spec.Name, f, maps) // recording.go: never blocks
	t5 := time.Now()
	c.copyStatus()
	m.Stages[StageAlerts].Observe(t5.Sub(t4))
	m.Latency.Observe(t5.Sub(f.Capture))
	m.frameDone(t5)
	// The camera's frame, its maps and its zone results all pass here:
	// per-camera hooks (benchmarks, recording) belong at this point.
	if on := c.p.opts.OnFrame; on != nil {
		on(FrameTiming{Camera: c.spec.Name, CameraIndex: c.idx, Seq: f.Seq, Capture: f.Capture, Start: t0,
			Inference: tm.Depth + tm.AuxUE, Done: t5, Risks: c.engine.LastRisks()})
	}
	c.maybeSnapshot(t5, f, rgb, maps)
}

func (c *cameraPipe) frameError(seq uint64, err error) {
	c.metrics.Errors.Add(1)
	c.rl.Warn("frame failed "+c.spec.Name, "frame failed", "camera", c.spec.Name, "frame", seq, "err", err,
		"errors_total", c.metrics.Errors.Load())
}

// handleEvent counts, records and forwards one alert event of the camera.
func (c *cameraPipe) handleEvent(ev *alerts.Event) {
	c.metrics.countEvent(ev)
	rec := EventRecord{Seq: ev.Seq, Time: time.UnixMilli(ev.TimeMS).Format("15:04:05.000"), Camera: c.spec.Name, Type: string(ev.Type),
		Kind: string(ev.Kind), Zone: ev.Zone, Level: ev.Level.String(), Previous: ev.Previous.String(), Episode: ev.ID}
	if ev.Snapshot != nil {
		rec.Snapshot = ev.Snapshot.Path
	}
	for i, r := range ev.Reasons {
		if i > 0 {
			rec.Reasons += ","
		}
		rec.Reasons += r
	}
	c.p.addEvent(rec)
	if on := c.p.opts.OnEvent; on != nil {
		on(ev)
	}
}

// copyStatus keeps every zone's status for ZoneStatus (no allocation
// unless the number of zones changed).
func (c *cameraPipe) copyStatus() {
	n := len(c.engine.Zones())
	c.statusMu.Lock()
	if len(c.status) != n {
		c.status = make([]alerts.ZoneStatus, n)
	}
	for i := range c.status {
		c.status[i] = c.engine.ZoneStatus(i)
	}
	c.statusMu.Unlock()
}

func (c *cameraPipe) zoneStatus() []alerts.ZoneStatus {
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	return append([]alerts.ZoneStatus(nil), c.status...)
}
