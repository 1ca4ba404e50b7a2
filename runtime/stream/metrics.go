package stream

import (
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/didoedge/didoedge/alerts"
)

// Stage names one timed step of the frame path.
type Stage int

// Stages in frame order. StageCamera is capture to the pipeline taking the
// frame (transport, decoding and waiting in the mailbox and for the
// scheduler).
const (
	StageCamera Stage = iota
	StagePreprocess
	StageDepth
	StageAuxUE
	// StageCopy is the host/device copies of the device-resident path
	// (inference.device_tensors; 0 on the host path, whose copies are in
	// depth and auxue).
	StageCopy
	StageReadout
	StageAlerts
	numStages
)

var stageNames = [numStages]string{"camera", "preprocess", "depth", "auxue", "copy", "readout", "alerts"}

func (s Stage) String() string { return stageNames[s] }

// latencyBuckets are histogram upper bounds in seconds (0.5 ms to 10 s).
var latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10}

// Histogram is a fixed-bucket latency histogram safe for concurrent use;
// Observe allocates nothing. It is exported through client_golang as a
// constant histogram at scrape time.
type Histogram struct {
	counts [17]atomic.Uint64 // len(latencyBuckets)+1, the last is +Inf
	sumNS  atomic.Int64
	count  atomic.Uint64
}

// Observe records one duration.
func (h *Histogram) Observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(latencyBuckets) && s > latencyBuckets[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNS.Add(int64(d))
	h.count.Add(1)
}

// Count returns the number of observations.
func (h *Histogram) Count() uint64 { return h.count.Load() }

// Mean returns the mean observation.
func (h *Histogram) Mean() time.Duration {
	n := h.count.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sumNS.Load() / int64(n))
}

// constHistogram is h as a Prometheus histogram (cumulative buckets).
func (h *Histogram) constHistogram(desc *prometheus.Desc, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(latencyBuckets))
	var cum uint64
	for i, b := range latencyBuckets {
		cum += h.counts[i].Load()
		buckets[b] = cum
	}
	cum += h.counts[len(latencyBuckets)].Load()
	return prometheus.MustNewConstHistogram(desc, cum, float64(h.sumNS.Load())/1e9, buckets, labels...)
}

// CameraMetrics are one camera's counters. Updates are atomic and
// allocation-free; they are exported with a camera label.
type CameraMetrics struct {
	Camera  string
	Frames  atomic.Uint64 // frames processed
	Dropped atomic.Uint64 // frames the camera produced that the pipeline never took
	Invalid atomic.Uint64 // frames with non-finite model outputs (not assessed)
	// ModelFaults counts frames the models could not assess: NaN/Inf
	// outputs and unrecovered run failures (modelfault.go).
	ModelFaults atomic.Uint64
	Errors      atomic.Uint64 // frames that failed (decode size, model run)
	Stages      [numStages]Histogram
	Latency     Histogram // capture to alerts assessed and events queued

	fpsBits   atomic.Uint64
	lastFrame atomic.Int64        // unix ns of the last processed frame
	lastFault atomic.Int64        // unix ns of the last model fault
	events    [3][3]atomic.Uint64 // level (ok, warn, critical) x type

	// source counters of an RTSP camera (nil otherwise)
	decodeErrors, reconnects func() uint64
	// up reports whether the camera's frames arrive within its stall
	// limit, degraded whether it is reported degraded, restarts its
	// in-process source restarts (set by the pipeline).
	up, degraded func() bool
	restarts     func() uint64
	// domain reads the camera's domain monitor (domain.go).
	domain func() DomainStatus
}

// frameDone updates the frame rate (exponentially weighted over about 16
// frames) and the frame counter.
func (m *CameraMetrics) frameDone(now time.Time) {
	m.Frames.Add(1)
	prev := m.lastFrame.Swap(now.UnixNano())
	if prev == 0 {
		return
	}
	dt := float64(now.UnixNano()-prev) / 1e9
	if dt <= 0 {
		return
	}
	old := math.Float64frombits(m.fpsBits.Load())
	fps := 1 / dt
	if old != 0 {
		fps = old + (fps-old)/16
	}
	m.fpsBits.Store(math.Float64bits(fps))
}

// FPS returns the recent processing rate (0 after 2 s without frames).
func (m *CameraMetrics) FPS() float64 {
	last := m.lastFrame.Load()
	if last == 0 || time.Since(time.Unix(0, last)) > 2*time.Second {
		return 0
	}
	return math.Float64frombits(m.fpsBits.Load())
}

// LastFrame is when the camera's last frame was processed (zero before
// the first).
func (m *CameraMetrics) LastFrame() time.Time {
	ns := m.lastFrame.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// eventTypes indexes events' second dimension.
var eventTypes = [3]alerts.EventType{alerts.EventNew, alerts.EventUpdate, alerts.EventEnd}

// countEvent counts one event by level and type.
func (m *CameraMetrics) countEvent(ev *alerts.Event) {
	l := int(ev.Level)
	if l < 0 || l > 2 {
		return
	}
	for t, et := range eventTypes {
		if et == ev.Type {
			m.events[l][t].Add(1)
		}
	}
}

// Metrics are the runtime's metrics: per-camera counters (CameraMetrics)
// and process-wide ones, registered on a client_golang registry of their
// own with the Go and process collectors. /metrics serves Registry.
type Metrics struct {
	Reloads atomic.Uint64 // successful SIGHUP reloads
	// CamerasAdded and CamerasRemoved count cameras Apply started and
	// stopped at run time.
	CamerasAdded, CamerasRemoved atomic.Uint64

	reg *prometheus.Registry

	mu        sync.Mutex
	providers map[string]func() string // model role -> its provider now
	cams      []*CameraMetrics
}

// NewMetrics returns metrics with the Go and process collectors registered.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), providers: map[string]func() string{}}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		(*metricsCollector)(m))
	return m
}

// Registry is the client_golang registry holding every metric.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// AddCamera adds a camera's counters (exported with camera=name).
func (m *Metrics) AddCamera(name string) *CameraMetrics {
	c := &CameraMetrics{Camera: name}
	m.mu.Lock()
	m.cams = append(m.cams, c)
	m.mu.Unlock()
	return c
}

// RemoveCamera drops a camera's counters (a camera removed at run time):
// its series leave the next scrape.
func (m *Metrics) RemoveCamera(c *CameraMetrics) {
	m.mu.Lock()
	m.cams = slices.DeleteFunc(slices.Clone(m.cams), func(x *CameraMetrics) bool { return x == c })
	m.mu.Unlock()
}

// Cameras returns every camera's counters, in config order.
func (m *Metrics) Cameras() []*CameraMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.cams)
}

// Camera returns camera i's counters (config order); nil when out of range.
func (m *Metrics) Camera(i int) *CameraMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i < 0 || i >= len(m.cams) {
		return nil
	}
	return m.cams[i]
}

// SetProvider records how to read the execution provider a model runs on
// (read at scrape time: runtime/infer's fault policy may rebuild a session
// on the next provider).
func (m *Metrics) SetProvider(model string, provider func() string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.providers[model] = provider
}

// Gauge adds a process-wide gauge whose value is read at scrape time.
func (m *Metrics) Gauge(name, help string, fn func() float64) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
}

// CounterFunc adds a process-wide counter whose value is read at scrape
// time (a monotonic count kept elsewhere).
func (m *Metrics) CounterFunc(name, help string, fn func() float64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, fn))
}

// Register adds collectors that other packages own (the transports'
// metrics).
func (m *Metrics) Register(cs ...prometheus.Collector) {
	m.reg.MustRegister(cs...)
}

// WriteTo writes every metric in the Prometheus text format (0.0.4).
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	mfs, err := m.reg.Gather()
	if err != nil {
		return 0, err
	}
	cw := &countWriter{w: w}
	enc := expfmt.NewEncoder(cw, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return cw.n, err
		}
	}
	return cw.n, cw.err
}

var (
	camLabel    = []string{"camera"}
	descFrames  = prometheus.NewDesc("didoedge_frames_total", "Frames processed by the pipeline.", camLabel, nil)
	descDropped = prometheus.NewDesc("didoedge_frames_dropped_total",
		"Frames the camera produced that the pipeline never took (latest-frame policy).", camLabel, nil)
	descInvalid = prometheus.NewDesc("didoedge_frames_invalid_total", "Frames whose model outputs held NaN or Inf; not assessed.", camLabel, nil)
	descErrors  = prometheus.NewDesc("didoedge_frame_errors_total", "Frames that failed in preprocessing or inference.", camLabel, nil)
	descFaults  = prometheus.NewDesc("didoedge_model_faults_total",
		"Frames the camera delivered but the models could not assess (NaN/Inf outputs, unrecovered run failures): the camera's model_fault episodes.", camLabel, nil)
	descFPS = prometheus.NewDesc("didoedge_fps", "Recent processing rate in frames per second.", camLabel, nil)
	descUp  = prometheus.NewDesc("didoedge_camera_up",
		"1 while the camera's frames are processed within alerts.events.camera_stall (its /healthz frames check).", camLabel, nil)
	descStage = prometheus.NewDesc("didoedge_stage_duration_seconds", "Time spent in each pipeline stage per frame.",
		[]string{"camera", "stage"}, nil)
	descLatency = prometheus.NewDesc("didoedge_frame_latency_seconds", "Capture time to alerts assessed and events queued.", camLabel, nil)
	descEvents  = prometheus.NewDesc("didoedge_events_total", "Alert events by camera, level and type.",
		[]string{"camera", "level", "type"}, nil)
	descDecode = prometheus.NewDesc("didoedge_camera_decode_errors_total", "Corrupt packets or pictures the camera client skipped.",
		camLabel, nil)
	descReconnects = prometheus.NewDesc("didoedge_camera_reconnects_total", "Camera sessions that ended in an error.", camLabel, nil)
	descDegraded   = prometheus.NewDesc("didoedge_camera_degraded",
		"1 while the camera is degraded: no frame within alerts.events.camera_stall, its source failed or is being restarted, or a domain shift outlasted domain.persistence (the other cameras go on; /healthz lists it).", camLabel, nil)
	descDomainDistance = prometheus.NewDesc("didoedge_domain_distance",
		"The camera's distance to the AuxUE's training domain, smoothed over domain.window (about 1 for training-like frames; runtime/domain).", camLabel, nil)
	descDomainThreshold = prometheus.NewDesc("didoedge_domain_threshold", "The domain monitor's threshold on didoedge_domain_distance.", camLabel, nil)
	descDomainShifted   = prometheus.NewDesc("didoedge_domain_shifted",
		"1 while the camera's frames are unlike the models' training domain (a domain_shift episode is open).", camLabel, nil)
	descDomainShifts = prometheus.NewDesc("didoedge_domain_shifts_total", "Domain shifts begun (domain_shift episodes).", camLabel, nil)
	descRestarts     = prometheus.NewDesc("didoedge_camera_restarts_total",
		"In-process restarts of the camera's source after pipeline.camera_restart without a frame.", camLabel, nil)
	descReloads  = prometheus.NewDesc("didoedge_config_reloads_total", "Successful SIGHUP reloads of zones and thresholds.", nil, nil)
	descAdded    = prometheus.NewDesc("didoedge_cameras_added_total", "Cameras started at run time (control API, SIGHUP).", nil, nil)
	descRemoved  = prometheus.NewDesc("didoedge_cameras_removed_total", "Cameras stopped and removed at run time (control API, SIGHUP).", nil, nil)
	descProvider = prometheus.NewDesc("didoedge_provider_info", "Execution provider in use per model (value 1).",
		[]string{"model", "provider"}, nil)
)

// metricsCollector exports the atomics of Metrics at scrape time, so that
// the frame path never touches client_golang.
type metricsCollector Metrics

func (c *metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFrames, descDropped, descInvalid, descErrors, descFPS, descUp, descStage, descLatency,
		descEvents, descDecode, descReconnects, descReloads, descProvider, descDegraded, descRestarts, descFaults, descAdded, descRemoved,
		descDomainDistance, descDomainThreshold, descDomainShifted, descDomainShifts} {
		ch <- d
	}
}

func (c *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	m := (*Metrics)(c)
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(descReloads, m.Reloads.Load())
	counter(descAdded, m.CamerasAdded.Load())
	counter(descRemoved, m.CamerasRemoved.Load())
	m.mu.Lock()
	for model, provider := range m.providers {
		ch <- prometheus.MustNewConstMetric(descProvider, prometheus.GaugeValue, 1, model, provider())
	}
	cams := slices.Clone(m.cams)
	m.mu.Unlock()
	for _, cm := range cams {
		name := cm.Camera
		counter(descFrames, cm.Frames.Load(), name)
		counter(descDropped, cm.Dropped.Load(), name)
		counter(descInvalid, cm.Invalid.Load(), name)
		counter(descErrors, cm.Errors.Load(), name)
		counter(descFaults, cm.ModelFaults.Load(), name)
		ch <- prometheus.MustNewConstMetric(descFPS, prometheus.GaugeValue, cm.FPS(), name)
		if cm.up != nil {
			ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, b2f(cm.up()), name)
		}
		if cm.degraded != nil {
			ch <- prometheus.MustNewConstMetric(descDegraded, prometheus.GaugeValue, b2f(cm.degraded()), name)
			counter(descRestarts, cm.restarts(), name)
		}
		if cm.domain != nil {
			if d := cm.domain(); d.On {
				ch <- prometheus.MustNewConstMetric(descDomainDistance, prometheus.GaugeValue, d.Smoothed, name)
				ch <- prometheus.MustNewConstMetric(descDomainThreshold, prometheus.GaugeValue, d.Threshold, name)
				ch <- prometheus.MustNewConstMetric(descDomainShifted, prometheus.GaugeValue, b2f(d.Shifted), name)
				counter(descDomainShifts, d.Shifts, name)
			}
		}
		for s := range numStages {
			ch <- cm.Stages[s].constHistogram(descStage, name, stageNames[s])
		}
		ch <- cm.Latency.constHistogram(descLatency, name)
		for l := range 3 {
			for t := range 3 {
				counter(descEvents, cm.events[l][t].Load(), name, alerts.Level(l).String(), string(eventTypes[t]))
			}
		}
		if cm.decodeErrors != nil {
			counter(descDecode, cm.decodeErrors(), name)
			counter(descReconnects, cm.reconnects(), name)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}
