package stream

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
	"github.com/didoedge/didoedge/alerts/mqttpub"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/internal/lograte"
	"github.com/didoedge/didoedge/runtime/domain"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// Options are the parts of a pipeline that are not in the config file.
type Options struct {
	// Source overrides the single camera's source (tests, benchmarks); nil
	// builds the source the config describes. Shorthand for Sources[0].
	Source camera.Source
	// Sources override the cameras' sources, in config order; a nil entry
	// builds the source the config describes.
	Sources []camera.Source
	Logger  *slog.Logger
	// OnEvent is called from the pipeline goroutine for every alert event
	// after it was queued durably; it must return quickly.
	OnEvent func(*alerts.Event)
	// OpenSource, when set, opens camera index's source (named name)
	// again for an in-process restart of a source given in Sources (a
	// camera without processed frames for pipeline.camera_restart); nil
	// restarts such a source as it is (its fetcher only). Sources the
	// pipeline built from the config are always opened again.
	OpenSource func(index int, name string) (camera.Source, error)
	// OnFrame is called from the pipeline goroutine after each assessed
	// frame of any camera with its timing; benchmarks use it. It must not
	// block.
	OnFrame func(FrameTiming)
	// OnMaps is called from the pipeline goroutine after each assessed
	// frame with the models' maps (frame-size and on their own grids;
	// infer.Maps); they alias the pipeline's buffers and are valid only
	// during the call, which must not block. A replay compares them with
	// the recorded maps.
	OnMaps func(camera string, seq uint64, maps infer.Maps)
	// Tap, when set, sees the assessed frames it wants and every alert
	// event and zone state (the live Foxglove server; tap.go).
	Tap Tap
}

// FrameTiming is the timing of one assessed frame.
type FrameTiming struct {
	// Camera is the camera's name; CameraIndex its place in the config.
	Camera      string
	CameraIndex int
	Seq         uint64
	Capture     time.Time     // camera capture time
	Start       time.Time     // the pipeline took the frame
	Inference   time.Duration // depth + AuxUE runs
	Done        time.Time     // events queued in the outbox
	// Risks are the frame's zone metrics (before fusion), in zone order;
	// valid only during the OnFrame call.
	Risks []alerts.ZoneRisk
}

// Pipeline runs camera -> depth -> AuxUE -> alerts for every camera of a
// configuration. The cameras share one ONNX Runtime session per model, one
// MQTT service and one outbox; each has its own engine (episodes, retained
// states, stats, camera faults), counters and debug snapshot. One
// goroutine, the scheduler, serves the cameras round-robin, each with the
// newest frame it has; a camera without a frame is skipped, so a slow or
// dead camera never holds the others back. Create it with New, drive it
// with Run; Reload, Apply (which also adds and removes cameras), Watch,
// View, Events and Metrics are safe to call from other goroutines.
type Pipeline struct {
	cfg  *runconfig.Config
	log  *slog.Logger
	opts Options

	// cams are the cameras in config order, owned by the scheduler
	// goroutine (Run): Apply adds and removes cameras there, between two
	// batches. Other goroutines read the immutable list that set holds
	// (cameras()), replaced after every change.
	cams    []*cameraPipe
	set     atomic.Pointer[camSet]
	models  *Models // owns the sessions; cams[i].models are views of it
	sink    *alertSink
	metrics *Metrics

	reloadReq chan reloadRequest
	applied   atomic.Pointer[runconfig.Config] // Config()
	eventsMu  sync.Mutex
	eventLog  []EventRecord
	ready     atomic.Bool
	running   atomic.Bool  // Run is in its frame loop
	runStart  atomic.Int64 // unix ns when Run started
	loopNS    atomic.Int64 // unix ns when the scheduler loop last went round (Health)
	closeOnce sync.Once
	modelsMu  sync.Mutex // guards models against Close while Health reads it
	// closedProviders are the providers the models last ran on, kept by
	// closeModels for Providers after Close.
	closedProviders [2]string
	rl              *lograte.Limiter
	rec             *recorderHook // record: section (recording.go); nil when off
	// domainRec is the AuxUE's training-domain record the cameras'
	// domain monitors measure against (domain.go); nil when off.
	domainRec *domain.Record

	// batching (scheduler goroutine only): the batch size and scratch
	// slices of that capacity, so that a batch allocates nothing
	batch        int
	times        StageTimes
	batchCams    []*cameraPipe
	batchSlots   []*frameSlot
	batchFrames  []*camera.Frame
	batchViews   []*Models
	batchStaged  []*infer.Staged
	batchScratch []*infer.Models
	batchOK      []int
}

// EventRecord is an alert event as the debug page lists it.
type EventRecord struct {
	Seq      uint64 `json:"seq"`
	Time     string `json:"time"`
	Camera   string `json:"camera"`
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
// before minutes of model loading; then it loads the models once, checks
// that their inputs and outputs fit together, and opens every camera's
// engine and source. Close releases everything if Run is not called.
func New(ctx context.Context, cfg *runconfig.Config, opts Options) (_ *Pipeline, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	specs, err := cfg.CameraSpecs()
	if err != nil {
		return nil, err
	}
	if opts.Source != nil {
		if len(opts.Sources) > 0 {
			return nil, errors.New("runtime options: Source and Sources are exclusive")
		}
		opts.Sources = []camera.Source{opts.Source}
	}
	if len(opts.Sources) > len(specs) {
		return nil, fmt.Errorf("runtime options: %d sources for %d cameras", len(opts.Sources), len(specs))
	}
	engineSpecs := make([]alerts.EngineSpec, len(specs))
	for i, cs := range specs {
		if engineSpecs[i], err = cs.EngineSpec(); err != nil {
			return nil, err
		}
	}
	// p is not the named result: "return nil, err" must not clear it before
	// the deferred cleanup runs.
	p := &Pipeline{cfg: cfg, log: log, opts: opts, metrics: NewMetrics(), reloadReq: make(chan reloadRequest),
		rl: lograte.New(log, 0)}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	// Recordings identify every camera's calibration file.
	if p.rec, err = newRecorderHook(cfg, specs, log); err != nil { // recording (recording.go)
		return nil, err
	}
	if p.sink, err = openAlerts(ctx, cfg.AlertsConfig, log, append(p.rec.sinks(), tapSinks(opts.Tap)...)...); err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	p.domainRec = domainRecord(cfg, log) // domain.go
	for i, cs := range specs {
		c := &cameraPipe{p: p, idx: i, name: cs.Name, spec: cs, metrics: p.metrics.AddCamera(cs.Name), rl: p.rl}
		if c.engine, err = p.sink.newEngine(engineSpecs[i], c.handleEvent); err != nil {
			return nil, fmt.Errorf("%s: %w", cs.Key, err)
		}
		if c.dom, err = newDomainMonitor(p.domainRec, cfg.Domain, c.engine.Calibration()); err != nil {
			return nil, fmt.Errorf("%s: %w", cs.Key, err)
		}
		c.stallNS.Store(int64(cs.Alerts.Events.CameraStall))
		p.cams = append(p.cams, c)
	}
	p.publishCameras()
	models, err := OpenPipelineModels(ctx, cfg, len(specs), log)
	if err != nil {
		return nil, err
	}
	p.batch = models.MaxBatch()
	b := p.batch
	p.batchCams, p.batchSlots, p.batchFrames = make([]*cameraPipe, 0, b), make([]*frameSlot, 0, b), make([]*camera.Frame, 0, b)
	p.batchViews, p.batchStaged, p.batchScratch, p.batchOK = make([]*Models, 0, b), make([]*infer.Staged, 0, b), make([]*infer.Models, b), make([]int, 0, b)
	p.modelsMu.Lock()
	p.models = models
	p.modelsMu.Unlock()
	mo := p.models
	p.metrics.SetProvider("depth", mo.DepthSession().Provider)
	p.metrics.SetProvider("auxue", mo.AuxUESession().Provider)
	p.metrics.Register(modelCollectors(mo.DepthSession(), mo.AuxUESession())...) // modelfault.go
	for i, c := range p.cams {
		// The first camera uses the models themselves, the others views
		// with their own buffers over the same sessions.
		c.models = mo
		// One camera, one frame per batch: its fetcher may stage a frame
		// straight into the sessions' input while they are idle.
		c.direct = len(p.cams) == 1 && p.batch == 1
		if i > 0 {
			if c.models, err = mo.Share(); err != nil {
				return nil, fmt.Errorf("%s: %w", c.spec.Key, err)
			}
		}
		if in := c.spec.Source.Intrinsics; in != nil {
			// The camera's fx, for a depth read-out that depends on it
			// (canonical_focal); it follows the frame size.
			if err = c.models.SetFocal(in.Fx, in.Width); err != nil {
				return nil, fmt.Errorf("%s.intrinsics: %w", c.spec.Key, err)
			}
		}
		if i < len(opts.Sources) {
			c.src = opts.Sources[i]
		}
		if c.src == nil {
			if err = c.openCamera(log); err != nil {
				return nil, err
			}
		}
		inW, inH := mo.InputSize()
		c.snap.init(inW, inH, inW, inH, c.engine.Zones(), c.engine.Calibration().TauE)
		c.registerMetrics()
	}
	p.registerMetrics()
	p.applied.Store(cfg)
	return p, nil
}

// registerMetrics adds the process-wide gauges and counters read at
// scrape time.
func (p *Pipeline) registerMetrics() {
	m := p.metrics
	m.Gauge("didoedge_healthy", "1 while /healthz passes: the pipeline as a whole works (running, models loaded, scheduler going round, some camera's frames within alerts.events.camera_stall).",
		func() float64 { return b2f(p.Health().OK) })
	m.Gauge("didoedge_degraded", "1 while something a restart of the unit would not mend is down: a camera (didoedge_camera_degraded) or the outbox (didoedge_outbox_write_fault).",
		func() float64 { return b2f(len(p.Health().Degraded) > 0) })
	m.Gauge("didoedge_cameras", "Cameras configured (added and removed at run time included).", func() float64 { return float64(len(p.cameras().list)) })
	// The transports register their own: MQTT publisher, outbox, embedded
	// broker (with its store), snapshot renderer.
	m.Register(p.sink.svc.Collectors()...)
	if r := p.sink.render; r != nil {
		m.Register(r.Collectors()...)
	}
	p.rec.registerMetrics(m) // didoedge_record_* (recording.go)
}

// modelsLoaded reports whether both sessions are open.
func (p *Pipeline) modelsLoaded() bool {
	p.modelsMu.Lock()
	defer p.modelsMu.Unlock()
	return p.models != nil && p.models.DepthSession() != nil && p.models.AuxUESession() != nil
}

// Metrics returns the pipeline's metrics.
func (p *Pipeline) Metrics() *Metrics { return p.metrics }

// Providers returns the execution providers the depth model and the
// AuxUE run on now (a session rebuilt by runtime/infer's fault policy
// runs on the next one).
func (p *Pipeline) Providers() (depth, auxue string) {
	p.modelsMu.Lock()
	defer p.modelsMu.Unlock()
	if p.models == nil {
		return p.closedProviders[0], p.closedProviders[1]
	}
	return p.models.DepthSession().Provider(), p.models.AuxUESession().Provider()
}

// BrokerAddr is the embedded broker's host:port, "" when publishing to an
// external broker.
func (p *Pipeline) BrokerAddr() string { return p.sink.brokerAddr() }

// MQTT is the MQTT service (publisher, outbox, embedded broker): the
// control set topics subscribe through it (mqttpub.Service.SubscribeControl).
func (p *Pipeline) MQTT() *mqttpub.Service { return p.sink.svc }

// Topics returns the MQTT topic builder.
func (p *Pipeline) Topics() alerts.Topics { return p.cfg.AlertsConfig.Topics() }

// Camera is the first camera's name (the only one of a single-camera
// configuration).
func (p *Pipeline) Camera() string { return p.cameras().list[0].name }

// Cameras lists the camera names in config order (as they are now:
// Apply adds and removes cameras).
func (p *Pipeline) Cameras() []string { return p.cameras().names() }

// readyWindow is how recent a camera's last frame must be for /readyz.
const readyWindow = 2 * time.Second

// Ready reports whether every camera had a frame assessed within the last
// 2 seconds.
func (p *Pipeline) Ready() bool {
	if !p.ready.Load() {
		return false
	}
	for _, c := range p.cameras().list {
		if !c.ready() {
			return false
		}
	}
	return true
}

// CameraReady reports, per camera in config order, whether it had a frame
// assessed within the last 2 seconds.
func (p *Pipeline) CameraReady() map[string]bool {
	cams := p.cameras().list
	out := make(map[string]bool, len(cams))
	for _, c := range cams {
		out[c.name] = p.ready.Load() && c.ready()
	}
	return out
}

// Run processes frames until ctx is cancelled or every source ends, then
// drains: the frame in flight is finished and its events queued, the
// outbox is flushed (within alerts.mqtt.close_timeout), and every resource
// is released. It returns nil after a cancellation or when every source
// ended (io.EOF of a non-looping image sequence ends that camera). A
// source's other errors are that camera's: it is reported degraded and
// its source restarted in the process (cameras.go), never the pipeline.
func (p *Pipeline) Run(ctx context.Context) (err error) {
	defer func() {
		cerr := p.Close()
		if err == nil {
			err = cerr
		}
	}()
	// The cameras get their own context: they stop after the pipeline has
	// finished its last frame, not before. Each camera runs under a child
	// of it (cameras.go), so that one camera's source can be restarted
	// while the others go on.
	camCtx, stopCam := context.WithCancel(context.WithoutCancel(ctx))
	defer stopCam()
	// Each camera's fetcher takes the newest frame of its source and
	// stages it (resize, normalize) into a free slot while the scheduler
	// runs the models on other slots; a staged frame the scheduler has not
	// taken when a newer one is staged is dropped (counted from the
	// sequence gap). got carries notifications (a slot is ready) and the
	// sources' errors.
	rs := &runState{camCtx: camCtx, got: make(chan fetch, numSlots*len(p.cams)), restarted: make(chan restartResult, len(p.cams)),
		sched: scheduler{ready: make([]bool, len(p.cams))}, live: len(p.cams)}
	for _, c := range p.cams {
		c.initSlots()
		p.startCamera(rs, c)
	}
	defer func() {
		stopCam()
		rs.wg.Wait()
	}()
	defer p.rec.startUploads(ctx)() // record.upload (recording.go)
	got := rs.got

	tick := time.NewTicker(p.cfg.Pipeline.Tick)
	defer tick.Stop()
	work := context.WithoutCancel(ctx) // the frames in flight always complete
	p.runStart.Store(time.Now().UnixNano())
	p.running.Store(true)
	defer p.running.Store(false)
	p.ready.Store(true)
	s := &rs.sched
	handle := func(r fetch) {
		c := r.cam
		if c.removed || r.gen != c.gen.Load() {
			return // from a fetcher stopped by a restart or a removal
		}
		if r.err == nil {
			s.ready[c.idx] = true
			return
		}
		if errors.Is(r.err, io.EOF) {
			p.log.Info("camera source ended", "camera", c.spec.Name)
			c.ended = true
			rs.live--
			return
		}
		if ctx.Err() != nil {
			return
		}
		// One camera's failure is that camera's: it is reported degraded
		// and its source restarted (camera_restart), the others go on.
		c.srcErr.Store(true)
		p.rl.Error("camera source failed "+c.spec.Name, "camera source failed; restarting it in the process",
			"camera", c.spec.Name, "err", r.err, "restart_in", p.restartAfter())
	}
	batch := make([]int, 0, p.batch)
	for {
		p.loopNS.Store(time.Now().UnixNano())
		if rs.live == 0 && s.next() < 0 {
			return nil
		}
		// Control first: a tick or a reload waits for at most one batch.
		i := s.next()
		if i < 0 {
			select {
			case <-ctx.Done():
				p.log.Info("stopping: draining the pipeline and flushing the outbox")
				return nil
			case now := <-tick.C:
				p.tick(now, rs)
			case req := <-p.reloadReq:
				req.reply <- p.apply(req.cfg, rs)
			case r := <-got:
				handle(r)
			case r := <-rs.restarted:
				p.restarted(rs, r)
			}
			continue
		}
		select {
		case <-ctx.Done():
			p.log.Info("stopping: draining the pipeline and flushing the outbox")
			return nil
		case now := <-tick.C:
			p.tick(now, rs)
			continue
		case req := <-p.reloadReq:
			req.reply <- p.apply(req.cfg, rs)
			continue
		case r := <-got:
			handle(r)
			continue
		case r := <-rs.restarted:
			p.restarted(rs, r)
			continue
		default:
		}
		// Up to batch_size cameras, round-robin, each with its newest
		// staged frame: a batch never waits for a camera without one.
		cams, slots, frames := p.batchCams[:0], p.batchSlots[:0], p.batchFrames[:0]
		for _, i := range s.takeBatch(batch[:0], p.batch) {
			c := p.cams[i]
			sl := c.take()
			if sl == nil {
				continue // a notification of a slot already taken
			}
			cams, slots, frames = append(cams, c), append(slots, sl), append(frames, &sl.frame)
		}
		if len(cams) == 0 {
			continue
		}
		p.runBatch(work, cams, slots, frames)
		for k, c := range cams {
			c.done(slots[k])
		}
	}
}

// runBatch runs the staged frames of cameras (one each) as one batch
// through the models, then each camera's own stages in turn.
func (p *Pipeline) runBatch(ctx context.Context, cams []*cameraPipe, slots []*frameSlot, frames []*camera.Frame) {
	t0 := time.Now()
	views, staged, ok := p.batchViews[:0], p.batchStaged[:0], p.batchOK[:0]
	for k, c := range cams {
		c.begin(frames[k], t0)
		if err := slots[k].err; err != nil {
			c.frameError(frames[k].Seq, err)
			continue
		}
		views, staged, ok = append(views, c.models), append(staged, slots[k].st), append(ok, k)
	}
	if len(views) == 0 {
		return
	}
	err := p.models.inferBatch(ctx, views, staged, p.batchScratch, &p.times)
	for _, k := range ok {
		if err != nil {
			if !cams[k].modelFault(frames[k], err) { // modelfault.go
				cams[k].frameError(frames[k].Seq, err)
			}
			continue
		}
		cams[k].finish(frames[k], t0, slots[k].prep, &p.times)
	}
}

// scheduler picks the cameras round-robin among those with a frame.
type scheduler struct {
	ready []bool // a camera has a staged frame (or had: see take)
	last  int    // the camera served last
}

// next returns the camera to serve, -1 when no camera has a frame.
func (s *scheduler) next() int {
	n := len(s.ready)
	for k := 1; k <= n; k++ {
		i := (s.last + k) % n
		if s.ready[i] {
			return i
		}
	}
	return -1
}

// take marks camera i's frame taken and makes it the last served.
func (s *scheduler) take(i int) {
	s.ready[i] = false
	s.last = i
}

// takeBatch takes up to max cameras with a frame, round-robin from the
// one after the last served, into dst.
func (s *scheduler) takeBatch(dst []int, max int) []int {
	for len(dst) < max {
		i := s.next()
		if i < 0 {
			break
		}
		s.take(i)
		dst = append(dst, i)
	}
	return dst
}

// tick runs every camera's stall detection, and stats and states when
// due, and restarts the sources of cameras that stayed dead.
func (p *Pipeline) tick(now time.Time, rs *runState) {
	p.superviseCameras(now, rs) // cameras.go
	for _, c := range p.cams {
		if err := c.engine.Tick(now); err != nil {
			p.rl.Warn("alerts tick "+c.spec.Name, "alerts tick", "camera", c.spec.Name, "err", err)
		}
	}
}

// reloadRequest asks the scheduler goroutine to apply a configuration.
type reloadRequest struct {
	cfg   *runconfig.Config
	reply chan error
}

// Reload re-reads the config file and applies it (Apply): SIGHUP. A file
// that does not load is refused and logged, and nothing changes.
func (p *Pipeline) Reload(ctx context.Context) error {
	if p.cfg.Path == "" {
		return p.reloadFailed(errors.New("reload: the configuration was not read from a file (built-in defaults): nothing to reload"))
	}
	cfg, err := runconfig.Load(p.cfg.Path)
	if err != nil {
		return p.reloadFailed(err)
	}
	return p.Apply(ctx, cfg)
}

// Apply swaps in the zones, ignore masks, calibrations and event settings
// of cfg on every camera at once, and starts the cameras cfg adds and
// stops those it drops, between two batches: the one entry point of
// run-time changes (SIGHUP re-reads the file and calls it; the control
// API hands it an edited copy of Config()). It is all or nothing: every
// camera's new engine state is built and validated first, and every
// added camera's source, models view and engine spec too; then the end
// events of every open episode (a reload starts the zones at ok; a
// removed camera's episodes end) are queued in one batch, and only when
// all of that worked does any camera change: its engine, its stored spec
// (Config()), its debug page zones, the recording metadata and the reload
// counter together; a removed camera's fetcher stops, its retained MQTT
// states (and Home Assistant configs) are cleared, its metrics series
// go; an added camera gets its engine, metrics, health entry, live view
// channels and recorder camera, and its fetcher starts (camerachange.go).
// If anything fails (a zone or calibration error, which names its file
// and key; a source that cannot be opened; an outbox that cannot queue
// the end events: full, disk full), nothing changes anywhere, the log
// says why, and the error is returned. Settings that need a restart (a
// running camera's source, models, transports) are not applied; a
// warning names them. It blocks until the pipeline applied or refused
// cfg. ctx bounds only the wait for the scheduler to take cfg: ended
// before, Apply returns ctx's error and nothing changed; once taken, Apply
// waits for the scheduler's answer whatever ctx does (the scheduler
// answers after at most one apply), so that a caller whose client went
// away still learns whether cfg is in force: the control API's
// configuration never diverges from the pipeline's.
func (p *Pipeline) Apply(ctx context.Context, cfg *runconfig.Config) error {
	if cfg == nil {
		return errors.New("apply: no configuration")
	}
	req := reloadRequest{cfg: cfg, reply: make(chan error, 1)}
	select {
	case p.reloadReq <- req:
	case <-ctx.Done():
		return fmt.Errorf("apply: not taken by the pipeline, nothing changed: %w", ctx.Err())
	}
	return <-req.reply // the scheduler replies to every request it takes
}

// Config returns the configuration last applied (New's, then each
// successful Apply's): its zones, calibrations and event settings are in
// effect. Settings that need a restart are those New started with. It is
// shared: callers must not modify it (edit a copy and Apply that).
func (p *Pipeline) Config() *runconfig.Config { return p.applied.Load() }

func (p *Pipeline) reloadFailed(err error) error {
	p.log.Error("reload failed; nothing changed: every camera keeps its zones and thresholds", "err", err)
	return err
}

// addEvent keeps an event record for the debug page.
func (p *Pipeline) addEvent(rec EventRecord) {
	p.eventsMu.Lock()
	if len(p.eventLog) == maxEventLog {
		copy(p.eventLog, p.eventLog[1:])
		p.eventLog = p.eventLog[:maxEventLog-1]
	}
	p.eventLog = append(p.eventLog, rec)
	p.eventsMu.Unlock()
}

// ZoneStatus returns each zone's level, fused signals and episode of the
// first camera after its last assessed frame (nil before the first).
func (p *Pipeline) ZoneStatus() []alerts.ZoneStatus { return p.cameras().list[0].zoneStatus() }

// CameraZoneStatus is ZoneStatus of the named camera; nil for an unknown
// camera.
func (p *Pipeline) CameraZoneStatus(name string) []alerts.ZoneStatus {
	c, ok := p.cameras().byName[name]
	if !ok {
		return nil
	}
	return c.zoneStatus()
}

// EventSnapshot returns the JPEG snapshot of an event id (the latest of
// its episode); snapshot.ErrNotFound when there is none.
func (p *Pipeline) EventSnapshot(id string) ([]byte, error) { return p.sink.snapshot(id) }

// Events returns the recent alert events of every camera, oldest first.
func (p *Pipeline) Events() []EventRecord {
	p.eventsMu.Lock()
	defer p.eventsMu.Unlock()
	return append([]EventRecord(nil), p.eventLog...)
}

// Close releases the alert publisher (ending open episodes and flushing
// its outbox), the models and the ONNX Runtime reference. Run calls it;
// call it only when Run is not.
func (p *Pipeline) Close() error {
	var err error
	p.closeOnce.Do(func() {
		now := time.Now()
		for _, c := range p.cams {
			if c.engine != nil {
				err = errors.Join(err, c.engine.Close(now))
			}
		}
		if p.sink != nil {
			err = errors.Join(err, p.sink.close(context.Background()))
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
	for _, c := range p.cams {
		if c.models != nil && c.models != p.models {
			c.models.Close() // a view: releases nothing but its reference
		}
	}
	p.closedProviders[0], p.closedProviders[1] = p.models.DepthSession().Provider(), p.models.AuxUESession().Provider()
	err := p.models.Close()
	p.models = nil
	return err
}
