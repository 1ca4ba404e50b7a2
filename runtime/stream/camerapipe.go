package stream

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/internal/lograte"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// cameraPipe is one camera of a pipeline: its source, its engine, its
// view of the shared models and its counters. Everything but the status,
// the snapshot and the counters is used from the scheduler goroutine only.
type cameraPipe struct {
	p   *Pipeline
	idx int // its place in the pipeline's cameras (scheduler goroutine)
	// name is spec.Name, never changed: other goroutines (health,
	// metrics, the debug page) read it while a reload replaces spec.
	name string
	spec runconfig.CameraSpec
	// removed: Apply removed the camera (scheduler goroutine only); what
	// its fetcher still sends is ignored.
	removed bool
	// es is the engine spec of a camera Apply is adding, validated
	// before the change and used to build its engine at the commit.
	es alerts.EngineSpec
	// src and rtsp change on an in-process restart (cameras.go); srcMu
	// guards them for the metrics read at scrape time. owned: the pipeline
	// opened the source from the config (and can open it again).
	srcMu                    sync.Mutex
	src                      camera.Source
	rtsp                     *camera.RTSPSource
	owned                    bool
	baseDecode, baseFailures uint64 // counters of the clients before a restart
	// Restarts (cameras.go): the fetcher generation, its stop function
	// and done channel, whether a restart is under way (scheduler only),
	// when the last began, how many there were, and whether the source
	// failed (degraded until it is restarted).
	gen atomic.Uint64
	// addedNS is when Apply started the camera (0: it ran from the
	// start): its stall and restart clocks count from then, not from
	// the start of Run.
	addedNS       atomic.Int64
	stop          context.CancelFunc
	stopped       chan struct{}
	restarting    bool
	lastRestartNS atomic.Int64
	restarts      atomic.Uint64
	srcErr        atomic.Bool

	models *Models
	engine *alerts.Engine
	// dom is the camera's domain monitor (domain.go); nil when off.
	dom     *domainMonitor
	metrics *CameraMetrics
	rl      *lograte.Limiter
	// faultDetail describes the camera's last model fault (modelfault.go).
	faultDetail atomic.Pointer[string]

	// Triple buffering between the camera's fetcher goroutine and the
	// scheduler: the fetcher fills a free slot (the source's frame, then
	// Stage: resize and normalize for the depth model) while the scheduler
	// runs another; a filled slot becomes ready, replacing (dropping) a
	// ready one the scheduler did not take yet, so the scheduler always
	// takes the newest staged frame and preprocessing overlaps inference.
	slots   [numSlots]frameSlot
	free    chan *frameSlot
	readyMu sync.Mutex
	staged  *frameSlot
	// paced: the source is consumer-paced (camera.ConsumerPaced): the
	// fetcher waits until the scheduler took the staged frame before it
	// stages the next, so that none is dropped; taken signals a take.
	paced bool
	taken chan struct{}
	// direct: the fetcher may stage into the sessions' input slot itself
	// (infer.Models.StageDirect) when no frame of the camera is staged or
	// in the models; directOut marks such a frame until it ran or was
	// dropped, inFlight a frame taken and not yet done (readyMu). Only
	// for a single camera at batch size 1, where nothing else writes the
	// slot.
	direct    bool
	directOut bool
	inFlight  bool
	directN   atomic.Uint64 // frames staged directly (tests, docs)
	ended     bool          // the source ended (io.EOF)
	image     alerts.Image  // the frame as the engine sees it (for snapshots)
	lastSeq   uint64

	statusMu sync.Mutex
	status   []alerts.ZoneStatus // each zone after the last frame

	// stallNS is alerts.events.camera_stall of the camera's spec now in
	// effect (0: the default), read by Health on other goroutines.
	stallNS atomic.Int64

	watchNS  atomic.Int64 // when a debug client last asked for data
	lastSnap time.Time
	snap     Snapshot
	tap      TapFrame // the frame as handed to Options.Tap (tap.go)
}

// numSlots: one being filled, one ready, one in the models.
const numSlots = 3

// frameSlot is a camera frame and its staged model input.
type frameSlot struct {
	frame camera.Frame
	st    *infer.Staged
	err   error         // Stage failed (a frame of a wrong size)
	prep  time.Duration // Stage's time, on the fetcher goroutine
}

// initSlots allocates the camera's slots (the staged inputs) once.
func (c *cameraPipe) initSlots() {
	c.taken = make(chan struct{}, 1)
	c.free = make(chan *frameSlot, numSlots)
	for i := range c.slots {
		c.slots[i].st = c.models.NewStaged()
		c.free <- &c.slots[i]
	}
}

// waitTaken blocks, for a consumer-paced source, until the scheduler took
// the staged frame (false: ctx ended first), so that the fetcher reads
// the source's next frame only then and none is lost.
func (c *cameraPipe) waitTaken(ctx context.Context) bool {
	for c.paced {
		c.readyMu.Lock()
		waiting := c.staged != nil
		c.readyMu.Unlock()
		if !waiting {
			return true
		}
		select {
		case <-c.taken:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// stage fills slot s from its frame (the fetcher's work) and makes it the
// ready slot; the slot it replaces goes back to the free list (a dropped
// frame, counted from the sequence gap).
func (c *cameraPipe) stage(s *frameSlot) {
	c.readyMu.Lock()
	// Nothing staged and nothing in the models: the scheduler cannot
	// start a batch until this frame is ready, so the slot is free.
	direct := c.direct && c.staged == nil && !c.inFlight && !c.directOut
	c.directOut = c.directOut || direct
	c.readyMu.Unlock()
	t0 := time.Now()
	if direct {
		s.err = c.models.StageDirect(s.st, s.frame.RGB, s.frame.Width, s.frame.Height)
		c.directN.Add(1)
	} else {
		s.err = c.models.Stage(s.st, s.frame.RGB, s.frame.Width, s.frame.Height)
	}
	s.prep = time.Since(t0)
	c.readyMu.Lock()
	old := c.staged
	c.staged = s
	if old != nil && old.st.Direct() {
		c.directOut = false // dropped before it ran
	}
	c.readyMu.Unlock()
	if old != nil {
		c.free <- old // never blocks: the list holds every slot at most once
	}
}

// done returns a slot the models ran to the free list.
func (c *cameraPipe) done(s *frameSlot) {
	c.readyMu.Lock()
	c.inFlight = false
	if s.st.Direct() {
		c.directOut = false
	}
	c.readyMu.Unlock()
	c.free <- s
}

// take returns the ready slot, nil when there is none.
func (c *cameraPipe) take() *frameSlot {
	c.readyMu.Lock()
	defer c.readyMu.Unlock()
	s := c.staged
	c.staged = nil
	if s != nil {
		c.inFlight = true
		select {
		case c.taken <- struct{}{}:
		default:
		}
	}
	return s
}

func (c *cameraPipe) openCamera(log *slog.Logger) error {
	src, rtsp, err := openSource(c.spec, log)
	if err != nil {
		return err
	}
	c.src, c.rtsp, c.owned = src, rtsp, true
	return nil
}

// registerMetrics connects the camera's source counters and health to its
// metrics.
func (c *cameraPipe) registerMetrics() {
	c.metrics.up = func() bool { ok, _ := c.framesHealth(time.Now()); return ok }
	if c.rtsp != nil {
		// Counters continue across in-process restarts (a new client).
		c.metrics.decodeErrors = func() uint64 {
			c.srcMu.Lock()
			defer c.srcMu.Unlock()
			return c.baseDecode + c.rtsp.Stats().DecodeErrors
		}
		c.metrics.reconnects = func() uint64 {
			c.srcMu.Lock()
			defer c.srcMu.Unlock()
			return c.baseFailures + c.rtsp.Stats().Failures
		}
	}
	c.metrics.degraded = func() bool { return c.degraded(time.Now()) }
	c.metrics.domain = c.domainStatus
	c.metrics.restarts = c.restarts.Load
}

// ready reports whether the camera had a frame assessed within readyWindow.
func (c *cameraPipe) ready() bool {
	last := c.metrics.lastFrame.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < readyWindow
}

// process runs one frame through every stage on the calling goroutine
// (Stage, then a batch of one). It allocates nothing unless the frame
// raises alert events or a debug client is watching.
func (c *cameraPipe) process(ctx context.Context, f *camera.Frame) {
	s := &c.slots[0]
	if s.st == nil {
		s.st = c.models.NewStaged()
	}
	t0 := time.Now()
	s.err = c.models.Stage(s.st, f.RGB, f.Width, f.Height)
	s.prep = time.Since(t0)
	p := c.p
	p.runBatch(ctx, append(p.batchCams[:0], c), append(p.batchSlots[:0], s), append(p.batchFrames[:0], f))
}

// begin counts the frame's camera stage and sequence gap when the
// scheduler takes it.
func (c *cameraPipe) begin(f *camera.Frame, t0 time.Time) {
	m := c.metrics
	m.Stages[StageCamera].Observe(t0.Sub(f.Capture))
	if c.lastSeq != 0 && f.Seq > c.lastSeq+1 {
		m.Dropped.Add(f.Seq - c.lastSeq - 1)
	}
	c.lastSeq = f.Seq
}

// finish runs the per-camera stages after the models: alerts, recording,
// status, metrics, hooks, snapshot.
func (c *cameraPipe) finish(f *camera.Frame, t0 time.Time, prep time.Duration, tm *StageTimes) {
	m := c.metrics
	maps, rgb, err := c.models.result()
	if err != nil {
		if !c.modelFault(f, err) { // modelfault.go
			c.frameError(f.Seq, err)
		}
		return
	}
	m.Stages[StagePreprocess].Observe(prep)
	m.Stages[StageDepth].Observe(tm.Depth)
	m.Stages[StageAuxUE].Observe(tm.AuxUE)
	m.Stages[StageCopy].Observe(tm.Copy)
	m.Stages[StageReadout].Observe(tm.Readout + tm.Preprocess)
	t4 := time.Now()
	inW, inH := c.models.InputSize()
	c.image = alerts.Image{Width: inW, Height: inH, RGB: rgb}
	c.observeDomain(f, rgb) // domain.go: before the zones, which flag or suppress on it
	if err := c.engine.Observe(alerts.Frame{Seq: f.Seq, Capture: f.Capture, Image: &c.image}, maps); err != nil {
		c.engineError(f.Seq, err)
	}
	c.p.rec.frame(c.spec.Name, f, c.models.modelMaps()) // recording.go: never blocks
	if on := c.p.opts.OnMaps; on != nil {
		on(c.spec.Name, f.Seq, c.models.modelMaps())
	}
	t5 := time.Now()
	c.copyStatus()
	c.tapFrame(f, maps) // tap.go: only while the live viewer wants this camera
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

// engineError logs an engine's error on a frame (rate-limited per kind):
// a sink's failure names that sink (the MQTT outbox, the snapshot
// renderer, the recorder; the publisher also logged each event it could
// not queue), anything else is the frame's assessment.
func (c *cameraPipe) engineError(frame uint64, err error) {
	var se *alerts.SinkError
	if errors.As(err, &se) {
		c.rl.Warn("alerts sink "+se.Sink+" "+c.spec.Name, "alerts: sink "+se.Sink+" failed", "camera", c.spec.Name, "frame", frame, "err", err)
		return
	}
	c.rl.Warn("alerts frame "+c.spec.Name, "alerts: frame not assessed", "camera", c.spec.Name, "frame", frame, "err", err)
}
