package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/broker"
	"github.com/didoedge/didoedge/alerts/outbox"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/internal/lograte"
)

// Options are the parts of a pipeline that are not in the config file.
type Options struct {
	// Source overrides the camera section (tests, benchmarks); nil builds
	// the source the config describes.
	Source camera.Source
	Logger *slog.Logger
	// OnEvent is called from the pipeline goroutine for every alert event
	// after it was queued durably; it must return quickly.
	OnEvent func(*alerts.Event)
	// OnFrame is called from the pipeline goroutine after each assessed
	// frame with its timing; benchmarks use it. It must not block.
	OnFrame func(FrameTiming)
}

// FrameTiming is the timing of one assessed frame.
type FrameTiming struct {
	Seq       uint64
	Capture   time.Time     // camera capture time
	Start     time.Time     // the pipeline took the frame
	Inference time.Duration // depth + AuxUE runs
	Done      time.Time     // events queued in the outbox
	// Risks are the frame's zone metrics (before fusion), in zone order;
	// valid only during the OnFrame call.
	Risks []alerts.ZoneRisk
}

// Pipeline runs camera -> depth -> AuxUE -> alerts. Create it with New,
// drive it with Run; Reload, Watch, View, Events and Metrics are safe to
// call from other goroutines.
type Pipeline struct {
	cfg  *Config
	log  *slog.Logger
	opts Options

	src       camera.Source
	rtsp      *camera.RTSPSource
	models    *Models
	providers [2]string // execution providers of the depth model and the AuxUE
	sink      *alertSink
	metrics   *Metrics
	times     StageTimes

	frame   camera.Frame
	image   alerts.Image // the frame as the engine sees it (for snapshots)
	lastSeq uint64

	statusMu sync.Mutex
	status   []alerts.ZoneStatus // each zone after the last frame, for ZoneStatus

	reloadReq chan chan error
	watchNS   atomic.Int64 // when a debug client last asked for data
	lastSnap  time.Time
	snap      Snapshot
	eventsMu  sync.Mutex
	eventLog  []EventRecord
	ready     atomic.Bool
	running   atomic.Bool  // Run is in its frame loop
	runStart  atomic.Int64 // unix ns when Run started
	closeOnce sync.Once
	modelsMu  sync.Mutex // guards models against Close while Health reads it
	rl        *lograte.Limiter
	rec       *recorderHook // record: section (recording.go); nil when off
}

// EventRecord is an alert event as the debug page lists it.
type EventRecord struct {
	Seq      uint64 `json:"seq"`
	Time     string `json:"time"`
	Type     string `json:"type"`
	Kind     string `json:"kind"`
	Zone     string `json:"zone,omitempty"`
	Level    string `json:"level"`
	Previous string `json:"previous_level"`
	Reasons  string `json:"reasons"`
	Episode  string `json:"id"`
	// Snapshot is the debug page's path of the event's snapshot, if any.
	Snapshot string `json:"snapshot,omitempty"`
}

// maxEventLog is how many recent events the debug page can show.
const maxEventLog = 50

// New starts the alert publisher (the outbox, whose lock a second
// instance on the same directory fails on, and the embedded broker, whose
// address may be taken, when configured) first, so that these errors come
// before minutes of model loading; then it loads the models, checks that
// their inputs and outputs fit together, and opens the camera source.
// Close releases everything if Run is not called.
func New(ctx context.Context, cfg *Config, opts Options) (_ *Pipeline, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// p is not the named result: "return nil, err" must not clear it before
	// the deferred cleanup runs.
	p := &Pipeline{cfg: cfg, log: log, opts: opts, metrics: &Metrics{}, reloadReq: make(chan chan error), rl: lograte.New(log, 0)}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if p.rec, err = newRecorderHook(cfg, log); err != nil { // recording (recording.go)
		return nil, err
	}
	if p.sink, err = openAlerts(ctx, cfg.AlertsConfig, log, p.handleEvent, p.rec.sinks()...); err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	models, err := OpenModels(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	p.modelsMu.Lock()
	p.models = models
	p.modelsMu.Unlock()
	mo := p.models
	p.providers = [2]string{mo.depth.Provider(), mo.aux.Provider()}
	p.metrics.SetProvider("depth", p.providers[0])
	p.metrics.SetProvider("auxue", p.providers[1])
	if p.src = opts.Source; p.src == nil {
		if p.src, err = p.openCamera(); err != nil {
			return nil, err
		}
	}
	p.snap.init(mo.inW, mo.inH, mo.inW, mo.inH, p.sink.zones(), p.sink.calibration().TauE)
	p.registerMetrics()
	return p, nil
}

// registerMetrics adds the gauges and counters read at scrape time.
func (p *Pipeline) registerMetrics() {
	m := p.metrics
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	m.Gauge("didoedge_outbox_pending", "Alert events awaiting the broker's acknowledgement.",
		func() float64 { return float64(p.sink.pending()) })
	m.Gauge("didoedge_mqtt_connected", "1 while the MQTT publisher is connected.", func() float64 { return b2f(p.sink.connected()) })
	m.Gauge("didoedge_healthy", "1 while /healthz passes (running, models loaded, frames within alerts.events.camera_stall, outbox writable).",
		func() float64 { return b2f(p.Health().OK) })
	ob := func() outbox.Stats { return p.sink.svc.Publisher().OutboxStats() }
	m.Gauge("didoedge_outbox_write_fault", "1 while the outbox cannot store events (its last write failed); new events are not queued.",
		func() float64 { return b2f(ob().WriteFault) })
	m.Gauge("didoedge_outbox_disk_full", "1 while the outbox's last write failed with ENOSPC.", func() float64 { return b2f(ob().DiskFull) })
	m.CounterFunc("didoedge_events_not_queued_total", "Alert events that could not be queued (outbox full or not writable); they are not delivered.",
		func() float64 { return float64(p.sink.svc.Publisher().NotQueued()) })
	m.CounterFunc("didoedge_outbox_lost_events_total", "Pending events destroyed by damaged outbox records, found on recovery at start.",
		func() float64 { return float64(ob().LostRecords) })
	m.CounterFunc("didoedge_outbox_dropped_updates_total", "Pending update events dropped to make room in a full outbox.",
		func() float64 { return float64(ob().DroppedUpdates) })
	m.CounterFunc("didoedge_outbox_refused_total", "Events refused because the outbox was full of undroppable events.",
		func() float64 { return float64(ob().Refused) })
	m.CounterFunc("didoedge_outbox_not_written_total", "Events whose outbox write or fsync failed (disk full, I/O error).",
		func() float64 { return float64(ob().NotWritten) })
	if _, ok := p.sink.svc.BrokerStats(); ok {
		bs := func() broker.Stats { s, _ := p.sink.svc.BrokerStats(); return s }
		for _, c := range []struct {
			name, help string
			fn         func(broker.Stats) uint64
		}{
			{"didoedge_broker_connections_refused_total", "Embedded broker: connections closed at the connection limit.", func(s broker.Stats) uint64 { return s.Refused }},
			{"didoedge_broker_idle_closed_total", "Embedded broker: connections closed for sending no CONNECT in time.", func(s broker.Stats) uint64 { return s.IdleClosed }},
			{"didoedge_broker_auth_failures_total", "Embedded broker: CONNECTs refused (credentials, forbidden will).", func(s broker.Stats) uint64 { return s.AuthFailed }},
			{"didoedge_broker_acl_denied_total", "Embedded broker: publishes and subscriptions the ACL refused.", func(s broker.Stats) uint64 { return s.Denied }},
			{"didoedge_broker_rate_limited_total", "Embedded broker: publishes dropped over the message rate.", func(s broker.Stats) uint64 { return s.RateLimited }},
		} {
			m.CounterFunc(c.name, c.help, func() float64 { return float64(c.fn(bs())) })
		}
	}
	if r := p.sink.render; r != nil {
		m.CounterFunc("didoedge_snapshots_skipped_total", "Event snapshots not taken: the renderer was behind.",
			func() float64 { return float64(r.Skipped()) })
		m.CounterFunc("didoedge_snapshots_failed_total", "Event snapshots that could not be rendered or stored.",
			func() float64 { return float64(r.Failed()) })
	}
	p.rec.registerMetrics(m) // didoedge_record_* (recording.go)
	if p.rtsp != nil {
		m.CounterFunc("didoedge_camera_decode_errors_total", "Corrupt packets or pictures the camera client skipped.",
			func() float64 { return float64(p.rtsp.Stats().DecodeErrors) })
		m.CounterFunc("didoedge_camera_reconnects_total", "Camera sessions that ended in an error.",
			func() float64 { return float64(p.rtsp.Stats().Failures) })
	}
}

// modelsLoaded reports whether both sessions are open.
func (p *Pipeline) modelsLoaded() bool {
	p.modelsMu.Lock()
	defer p.modelsMu.Unlock()
	return p.models != nil && p.models.depth != nil && p.models.aux != nil
}

func (p *Pipeline) openCamera() (camera.Source, error) {
	c := p.cfg.Camera
	id := p.cfg.AlertsConfig.Camera
	if c.Sequence != nil {
		s, err := camera.NewImageSequence(camera.SequenceConfig{Dir: c.Sequence.Dir, FPS: c.Sequence.FPS, Loop: c.Sequence.Loop, SourceID: id})
		if err != nil {
			return nil, fmt.Errorf("camera.sequence: %w", err)
		}
		return s, nil
	}
	s, err := camera.NewRTSPSource(camera.RTSPConfig{URL: c.URL, SourceID: id, UDP: c.UDP,
		StallTimeout: c.StallTimeout, BackoffMin: c.BackoffMin, BackoffMax: c.BackoffMax,
		RequestTimeout: c.RequestTimeout, Logger: p.log})
	if err != nil {
		return nil, fmt.Errorf("camera.url: %w", err)
	}
	p.rtsp = s
	return s, nil
}

// Metrics returns the pipeline's metrics.
func (p *Pipeline) Metrics() *Metrics { return p.metrics }

// Providers returns the execution providers of the depth model and the AuxUE.
func (p *Pipeline) Providers() (depth, auxue string) {
	return p.providers[0], p.providers[1]
}

// BrokerAddr is the embedded broker's host:port, "" when publishing to an
// external broker.
func (p *Pipeline) BrokerAddr() string { return p.sink.brokerAddr() }

// Topics returns the MQTT topic builder.
func (p *Pipeline) Topics() alerts.Topics { return p.cfg.AlertsConfig.Topics() }

// Camera is the camera id of the alerts section.
func (p *Pipeline) Camera() string { return p.cfg.AlertsConfig.Camera }

// Ready reports whether a frame was assessed within the last 2 seconds.
func (p *Pipeline) Ready() bool {
	last := p.metrics.lastFrame.Load()
	return p.ready.Load() && last != 0 && time.Since(time.Unix(0, last)) < 2*time.Second
}

// fetch is one frame request to the fetcher goroutine.
type fetch struct {
	frame *camera.Frame
	err   error
}

// Run processes frames until ctx is cancelled or the source ends, then
// drains: the frame in flight is finished and its events queued, the
// outbox is flushed (within alerts.mqtt.close_timeout), and every resource
// is released. It returns nil after a cancellation and the source's error
// otherwise (io.EOF of a non-looping image sequence is a clean end).
func (p *Pipeline) Run(ctx context.Context) (err error) {
	defer func() {
		cerr := p.Close()
		if err == nil {
			err = cerr
		}
	}()
	// The camera gets its own context: it stops after the pipeline has
	// finished its last frame, not before.
	camCtx, stopCam := context.WithCancel(context.WithoutCancel(ctx))
	defer stopCam()
	var camDone chan struct{}
	if p.rtsp != nil {
		camDone = make(chan struct{})
		go func() {
			defer close(camDone)
			p.rtsp.Run(camCtx)
		}()
		defer func() { stopCam(); <-camDone }()
	}

	// The fetcher waits for frames so that the pipeline goroutine can run
	// ticks and reloads meanwhile. It asks the source only when the
	// pipeline is ready for a frame: the source's mailbox keeps the newest
	// frame, so no stale frame is ever held here.
	want := make(chan *camera.Frame)
	got := make(chan fetch)
	fetchDone := make(chan struct{})
	go func() {
		defer close(fetchDone)
		for f := range want {
			err := p.src.Next(camCtx, f)
			select {
			case got <- fetch{frame: f, err: err}:
			case <-camCtx.Done():
				return
			}
		}
	}()
	defer func() { close(want); stopCam(); <-fetchDone }()

	tick := time.NewTicker(p.cfg.Pipeline.Tick)
	defer tick.Stop()
	work := context.WithoutCancel(ctx) // the frame in flight always completes
	p.runStart.Store(time.Now().UnixNano())
	p.running.Store(true)
	defer p.running.Store(false)
	p.ready.Store(true)
	want <- &p.frame
	for {
		select {
		case <-ctx.Done():
			p.log.Info("stopping: draining the pipeline and flushing the outbox")
			return nil
		case now := <-tick.C:
			if err := p.sink.tick(now); err != nil {
				p.rl.Warn("alerts tick", "alerts tick", "err", err)
			}
		case reply := <-p.reloadReq:
			reply <- p.reload()
		case r := <-got:
			if r.err != nil {
				if errors.Is(r.err, io.EOF) {
					p.log.Info("camera source ended")
					return nil
				}
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("camera: %w", r.err)
			}
			p.process(work, r.frame)
			want <- &p.frame
		}
	}
}

// Reload re-reads the config file's alerts section and swaps in its zones
// and calibration between two frames (SIGHUP). It blocks until the
// pipeline applied it or ctx ends.
func (p *Pipeline) Reload(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case p.reloadReq <- reply:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Pipeline) reload() error {
	ac, err := p.cfg.ReloadAlerts()
	if err != nil {
		p.log.Error("reload failed; keeping the current zones and thresholds", "err", err)
		return err
	}
	if err := p.sink.reload(ac, time.Now()); err != nil {
		p.log.Error("reload failed; keeping the current zones and thresholds", "err", err)
		return err
	}
	p.snap.setZones(p.sink.zones(), p.sink.calibration().TauE)
	p.rec.reloaded(p.cfg, ac) // recording.go: files name the new calibration
	p.metrics.Reloads.Add(1)
	p.log.Info("reloaded zones and thresholds", "zones", len(p.sink.zones()), "calibration", ac.Calibration)
	return nil
}

// process runs one frame through every stage. It allocates nothing unless
// the frame raises alert events or a debug client is watching.
func (p *Pipeline) process(ctx context.Context, f *camera.Frame) {
	m := p.metrics
	t0 := time.Now()
	m.Stages[StageCamera].Observe(t0.Sub(f.Capture))
	if p.lastSeq != 0 && f.Seq > p.lastSeq+1 {
		m.Dropped.Add(f.Seq - p.lastSeq - 1)
	}
	p.lastSeq = f.Seq

	maps, rgb, err := p.models.infer(ctx, f.RGB, f.Width, f.Height, &p.times)
	if err != nil {
		if errors.Is(err, ErrInvalidOutput) {
			m.Invalid.Add(1)
			return
		}
		p.frameError(f.Seq, err)
		return
	}
	tm := &p.times
	m.Stages[StagePreprocess].Observe(tm.Preprocess)
	m.Stages[StageDepth].Observe(tm.Depth)
	m.Stages[StageAuxUE].Observe(tm.AuxUE)
	m.Stages[StageReadout].Observe(tm.Readout)
	t4 := time.Now()
	p.image = alerts.Image{Width: p.models.inW, Height: p.models.inH, RGB: rgb}
	if err := p.sink.frame(alerts.Frame{Seq: f.Seq, Capture: f.Capture, Image: &p.image}, maps); err != nil {
		// The publisher logged each event not queued; this is the summary.
		p.rl.Warn("alerts frame", "alerts: events of a frame not queued", "frame", f.Seq, "err", err)
	}
	p.rec.frame(p.cfg.AlertsConfig.Camera, f, maps) // recording.go: never blocks
	t5 := time.Now()
	p.copyStatus()
	m.Stages[StageAlerts].Observe(t5.Sub(t4))
	m.Latency.Observe(t5.Sub(f.Capture))
	m.frameDone(t5)
	if p.opts.OnFrame != nil {
		p.opts.OnFrame(FrameTiming{Seq: f.Seq, Capture: f.Capture, Start: t0, Inference: tm.Depth + tm.AuxUE, Done: t5,
			Risks: p.sink.engine.LastRisks()})
	}
	p.maybeSnapshot(t5, f, rgb, maps)
}

func (p *Pipeline) frameError(seq uint64, err error) {
	p.metrics.Errors.Add(1)
	p.rl.Warn("frame failed", "frame failed", "frame", seq, "err", err, "errors_total", p.metrics.Errors.Load())
}

// handleEvent counts, records and forwards one alert event.
func (p *Pipeline) handleEvent(ev *alerts.Event) {
	p.metrics.countEvent(ev)
	rec := EventRecord{Seq: ev.Seq, Time: time.UnixMilli(ev.TimeMS).Format("15:04:05.000"), Type: string(ev.Type),
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
	p.eventsMu.Lock()
	if len(p.eventLog) == maxEventLog {
		copy(p.eventLog, p.eventLog[1:])
		p.eventLog = p.eventLog[:maxEventLog-1]
	}
	p.eventLog = append(p.eventLog, rec)
	p.eventsMu.Unlock()
	if p.opts.OnEvent != nil {
		p.opts.OnEvent(ev)
	}
}

// copyStatus keeps every zone's status for ZoneStatus (no allocation
// unless the number of zones changed).
func (p *Pipeline) copyStatus() {
	n := len(p.sink.zones())
	p.statusMu.Lock()
	if len(p.status) != n {
		p.status = make([]alerts.ZoneStatus, n)
	}
	for i := range p.status {
		p.status[i] = p.sink.engine.ZoneStatus(i)
	}
	p.statusMu.Unlock()
}

// ZoneStatus returns each zone's level, fused signals and episode after
// the last assessed frame (nil before the first).
func (p *Pipeline) ZoneStatus() []alerts.ZoneStatus {
	p.statusMu.Lock()
	defer p.statusMu.Unlock()
	return append([]alerts.ZoneStatus(nil), p.status...)
}

// EventSnapshot returns the JPEG snapshot of an event id (the latest of
// its episode); snapshot.ErrNotFound when there is none.
func (p *Pipeline) EventSnapshot(id string) ([]byte, error) { return p.sink.snapshot(id) }

// Events returns the recent alert events, oldest first.
func (p *Pipeline) Events() []EventRecord {
	p.eventsMu.Lock()
	defer p.eventsMu.Unlock()
	return append([]EventRecord(nil), p.eventLog...)
}

// Close releases the alert publisher (flushing its outbox), the models and
// the ONNX Runtime reference. Run calls it; call it only when Run is not.
func (p *Pipeline) Close() error {
	var err error
	p.closeOnce.Do(func() {
		if p.sink != nil {
			err = p.sink.close(context.Background())
		}
		err = errors.Join(err, p.rec.close(context.Background())) // after the engine's last events
		err = errors.Join(err, p.closeModels())
		p.rl.Flush()
	})
	return err
}

func (p *Pipeline) closeModels() error {
	p.modelsMu.Lock()
	defer p.modelsMu.Unlock()
	if p.models == nil {
		return nil
	}
	err := p.models.Close()
	p.models = nil
	return err
}
