package runtime

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/didoedge/didoedge/alerts"
)

// Stage names one timed step of the frame path.
type Stage int

// Stages in frame order. StageCamera is capture to the pipeline taking the
// frame (transport, decoding and waiting in the mailbox).
const (
	StageCamera Stage = iota
	StagePreprocess
	StageDepth
	StageAuxUE
	StageReadout
	StageAlerts
	numStages
)

var stageNames = [numStages]string{"camera", "preprocess", "depth", "auxue", "readout", "alerts"}

func (s Stage) String() string { return stageNames[s] }

// latencyBuckets are histogram upper bounds in seconds (0.5 ms to 10 s).
var latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10}

// Histogram is a fixed-bucket latency histogram safe for concurrent use;
// Observe allocates nothing.
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

// Metrics are the runtime's counters, written in the Prometheus text
// exposition format (version 0.0.4) by WriteTo. Updates are atomic and
// allocation-free.
type Metrics struct {
	Frames    atomic.Uint64 // frames processed
	Dropped   atomic.Uint64 // frames the camera produced that the pipeline never took
	Invalid   atomic.Uint64 // frames with non-finite model outputs (not assessed)
	Errors    atomic.Uint64 // frames that failed (decode size, model run)
	Reloads   atomic.Uint64 // successful SIGHUP reloads
	Stages    [numStages]Histogram
	Latency   Histogram // capture to alerts assessed and events queued
	fpsBits   atomic.Uint64
	lastFrame atomic.Int64        // unix ns of the last processed frame
	events    [3][3]atomic.Uint64 // level (ok, warn, critical) x type

	mu        sync.Mutex
	providers map[string]string // model role -> provider
	gauges    []gaugeFunc
}

type gaugeFunc struct {
	name, help, kind string
	fn               func() float64
}

// SetProvider records the execution provider a model runs on.
func (m *Metrics) SetProvider(model, provider string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.providers == nil {
		m.providers = map[string]string{}
	}
	m.providers[model] = provider
}

// Gauge adds a gauge whose value is read at scrape time.
func (m *Metrics) Gauge(name, help string, fn func() float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gauges = append(m.gauges, gaugeFunc{name, help, "gauge", fn})
}

// CounterFunc adds a counter whose value is read at scrape time (a
// monotonic count kept elsewhere).
func (m *Metrics) CounterFunc(name, help string, fn func() float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gauges = append(m.gauges, gaugeFunc{name, help, "counter", fn})
}

// frameDone updates the frame rate (exponentially weighted over about 16
// frames) and the frame counter.
func (m *Metrics) frameDone(now time.Time) {
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
func (m *Metrics) FPS() float64 {
	last := m.lastFrame.Load()
	if last == 0 || time.Since(time.Unix(0, last)) > 2*time.Second {
		return 0
	}
	return math.Float64frombits(m.fpsBits.Load())
}

// eventTypes indexes events' second dimension.
var eventTypes = [3]alerts.EventType{alerts.EventNew, alerts.EventUpdate, alerts.EventEnd}

// countEvent counts one event by level and type.
func (m *Metrics) countEvent(ev *alerts.Event) {
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

// WriteTo writes every metric in the Prometheus text format.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriter(w)
	cw := &countWriter{w: bw}
	counter := func(name, help string, v uint64) {
		fmt.Fprintf(cw, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
	}
	gauge := func(name, help string, v float64) {
		fmt.Fprintf(cw, "# HELP %s %s\n# TYPE %s gauge\n%s %s\n", name, help, name, name, formatFloat(v))
	}
	counter("didoedge_frames_total", "Frames processed by the pipeline.", m.Frames.Load())
	counter("didoedge_frames_dropped_total", "Frames the camera produced that the pipeline never took (latest-frame policy).", m.Dropped.Load())
	counter("didoedge_frames_invalid_total", "Frames whose model outputs held NaN or Inf; not assessed.", m.Invalid.Load())
	counter("didoedge_frame_errors_total", "Frames that failed in preprocessing or inference.", m.Errors.Load())
	counter("didoedge_config_reloads_total", "Successful SIGHUP reloads of zones and thresholds.", m.Reloads.Load())
	gauge("didoedge_fps", "Recent processing rate in frames per second.", m.FPS())

	const stageName = "didoedge_stage_duration_seconds"
	fmt.Fprintf(cw, "# HELP %s Time spent in each pipeline stage per frame.\n# TYPE %s histogram\n", stageName, stageName)
	for s := range numStages {
		writeHistogram(cw, stageName, `stage="`+stageNames[s]+`"`, &m.Stages[s])
	}
	const latName = "didoedge_frame_latency_seconds"
	fmt.Fprintf(cw, "# HELP %s Capture time to alerts assessed and events queued.\n# TYPE %s histogram\n", latName, latName)
	writeHistogram(cw, latName, "", &m.Latency)

	fmt.Fprintf(cw, "# HELP didoedge_events_total Alert events by level and type.\n# TYPE didoedge_events_total counter\n")
	for l := range 3 {
		for t := range 3 {
			fmt.Fprintf(cw, "didoedge_events_total{level=%q,type=%q} %d\n", alerts.Level(l).String(), eventTypes[t], m.events[l][t].Load())
		}
	}

	m.mu.Lock()
	roles := make([]string, 0, len(m.providers))
	for r := range m.providers {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	fmt.Fprintf(cw, "# HELP didoedge_provider_info Execution provider in use per model (value 1).\n# TYPE didoedge_provider_info gauge\n")
	for _, r := range roles {
		fmt.Fprintf(cw, "didoedge_provider_info{model=%q,provider=%q} 1\n", r, m.providers[r])
	}
	gauges := append([]gaugeFunc(nil), m.gauges...)
	m.mu.Unlock()
	for _, g := range gauges {
		fmt.Fprintf(cw, "# HELP %s %s\n# TYPE %s %s\n%s %s\n", g.name, g.help, g.name, g.kind, g.name, formatFloat(g.fn()))
	}
	if err := bw.Flush(); err != nil {
		return cw.n, err
	}
	return cw.n, cw.err
}

func writeHistogram(w io.Writer, name, labels string, h *Histogram) {
	sep := ""
	if labels != "" {
		sep = ","
	}
	var cum uint64
	for i, b := range latencyBuckets {
		cum += h.counts[i].Load()
		fmt.Fprintf(w, "%s_bucket{%s%sle=\"%s\"} %d\n", name, labels, sep, formatFloat(b), cum)
	}
	cum += h.counts[len(latencyBuckets)].Load()
	fmt.Fprintf(w, "%s_bucket{%s%sle=\"+Inf\"} %d\n", name, labels, sep, cum)
	braces := ""
	if labels != "" {
		braces = "{" + labels + "}"
	}
	fmt.Fprintf(w, "%s_sum%s %s\n%s_count%s %d\n", name, braces, formatFloat(float64(h.sumNS.Load())/1e9), name, braces, cum)
}

func formatFloat(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
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
