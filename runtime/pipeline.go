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
	"github.com/didoedge/didoedge/camera"
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
}

// Pipeline runs camera -> depth -> AuxUE -> alerts. Create it with New,
// drive it with Run; Reload, Watch, View, Events and Metrics are safe to
// call from other goroutines.
type Pipeline struct {
	cfg  *Config
	log  *slog.Logger
	opts Options

	src     camera.Source
	rtsp    *camera.RTSPSource
	models  *Models
	sink    *alertSink
	metrics *Metrics
	times   StageTimes

	frame   camera.Frame
	lastSeq uint64

	reloadReq chan chan error
	watchNS   atomic.Int64 // when a debug client last asked for data
	lastSnap  time.Time
	snap      Snapshot
	eventsMu  sync.Mutex
	eventLog  []EventRecord
	ready     atomic.Bool
	closeOnce sync.Once
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
}

// maxEventLog is how many recent events the debug page can show.
const maxEventLog = 50

// New loads the models, checks that their inputs and outputs fit together,
// opens the camera source and starts the alert publisher (and the embedded
// broker when configured). Close releases everything if Run is not called.
func New(ctx context.Context, cfg *Config, opts Options) (_ *Pipeline, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// p is not the named result: "return nil, err" must not clear it before
	// the deferred cleanup runs.
	p := &Pipeline{cfg: cfg, log: log, opts: opts, metrics: &Metrics{}, reloadReq: make(chan chan error)}
	defer func() {
		if err != nil {
			p.closeModels()
		}
	}()
	if p.models, err = OpenModels(ctx, cfg, log); err != nil {
		return nil, err
	}
	mo := p.models
	p.metrics.SetProvider("depth", mo.depth.Provider())
	p.metrics.SetProvider("auxue", mo.aux.Provider())
	if p.src = opts.Source; p.src == nil {
		if p.src, err = p.openCamera(); err != nil {
			return nil, err
		}
	}
	if p.sink, err = openAlerts(ctx, cfg.AlertsConfig, log, p.handleEvent); err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	p.snap.init(mo.inW, mo.inH, mo.inW, mo.inH, p.sink.zones, p.sink.cal.TauE)
	p.metrics.Gauge("didoedge_outbox_pending", "Alert events awaiting the broker's acknowledgement.",
		func() float64 { return float64(p.sink.pending()) })
	p.metrics.Gauge("didoedge_mqtt_connected", "1 while the MQTT publisher is connected.", func() float64 {
		if p.sink.pub.Connected() {
			return 1
		}
		return 0
	})
	if p.rtsp != nil {
		p.metrics.CounterFunc("didoedge_camera_decode_errors_total", "Corrupt packets or pictures the camera client skipped.",
			func() float64 { return float64(p.rtsp.Stats().DecodeErrors) })
		p.metrics.CounterFunc("didoedge_camera_reconnects_total", "Camera sessions that ended in an error.",
			func() float64 { return float64(p.rtsp.Stats().Failures) })
	}
	return p, nil
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
	return p.models.depth.Provider(), p.models.aux.Provider()
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
	p.ready.Store(true)
	want <- &p.frame
	for {
		select {
		case <-ctx.Done():
			p.log.Info("stopping: draining the pipeline and flushing the outbox")
			return nil
		case now := <-tick.C:
			if err := p.sink.tick(now); err != nil {
				p.log.Warn("alerts tick", "err", err)
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
	p.snap.setZones(p.sink.zones, p.sink.cal.TauE)
	p.metrics.Reloads.Add(1)
	p.log.Info("reloaded zones and thresholds", "zones", len(p.sink.zones), "calibration", ac.Calibration)
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
	if err := p.sink.frame(alerts.Frame{Seq: f.Seq, Capture: f.Capture}, maps); err != nil {
		p.log.Warn("alerts", "frame", f.Seq, "err", err)
	}
	t5 := time.Now()
	m.Stages[StageAlerts].Observe(t5.Sub(t4))
	m.Latency.Observe(t5.Sub(f.Capture))
	m.frameDone(t5)
	if p.opts.OnFrame != nil {
		p.opts.OnFrame(FrameTiming{Seq: f.Seq, Capture: f.Capture, Start: t0, Inference: tm.Depth + tm.AuxUE, Done: t5})
	}
	p.maybeSnapshot(t5, f, rgb, maps)
}

func (p *Pipeline) frameError(seq uint64, err error) {
	p.metrics.Errors.Add(1)
	p.log.Warn("frame failed", "frame", seq, "err", err)
}

// handleEvent counts, records and forwards one alert event.
func (p *Pipeline) handleEvent(ev *alerts.Event) {
	p.metrics.countEvent(ev)
	rec := EventRecord{Seq: ev.Seq, Time: time.UnixMilli(ev.TimeMS).Format("15:04:05.000"), Type: string(ev.Type),
		Kind: string(ev.Kind), Zone: ev.Zone, Level: ev.Level.String(), Previous: ev.Previous.String(), Episode: ev.ID}
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
		err = errors.Join(err, p.closeModels())
	})
	return err
}

func (p *Pipeline) closeModels() error {
	if p.models == nil {
		return nil
	}
	return p.models.Close()
}
