package stream

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/runtime/domain"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// DomainDegradedReason is the health reason of a camera whose domain shift
// outlasted domain.persistence.
const DomainDegradedReason = "the models were not trained for frames like these: train the AuxUE on this camera's data (docs/byo-model.md)"

// domainMonitor is one camera's domain monitor (package runtime/domain):
// the frame's statistics, their distance to the AuxUE's training-domain
// record, the smoothed and thresholded shift. The scheduler goroutine
// runs it; the atomics are read by health, metrics and the debug page.
type domainMonitor struct {
	rec     *domain.Record
	ex      *domain.Extractor
	scratch *domain.Scratch
	stats   []float64
	mon     *domain.Monitor
	// source says where the threshold came from (logs; scheduler goroutine).
	source string

	distBits, smoothBits, thrBits atomic.Uint64
	windowNS                      atomic.Int64 // mon's window (a reload changes it)
	shifted, persistent           atomic.Bool
	sinceNS                       atomic.Int64
	shifts                        atomic.Uint64 // shifts begun
	errs                          atomic.Uint64 // frames whose statistics failed
	// off: the record needs the depth model's feature tensor and the
	// frames' stays on the device (inference.device_tensors): the monitor
	// stopped rather than count every frame as foreign.
	off atomic.Bool
}

// domainRecord is the AuxUE's training-domain record the pipeline's
// cameras are measured against: nil when the monitor is off or the AuxUE
// has none (logged once).
func domainRecord(cfg *runconfig.Config, log *slog.Logger) *domain.Record {
	if cfg.Domain.Off {
		log.Info("domain monitor off (domain.off)")
		return nil
	}
	rec, err := cfg.ModelsConfig().AuxUESpec.DomainRecord()
	if err != nil {
		if errors.Is(err, infer.ErrNoDomainRecord) {
			log.Warn("domain monitor off: the AuxUE has no training-domain record, so frames unlike its training data cannot be noticed; retrain it with didoedge train auxue (docs/byo-model.md)",
				"auxue", cfg.AuxUE.Model)
		}
		return nil
	}
	return rec
}

// MonitorsDomain reports whether cfg's cameras run the domain monitor: it
// is not switched off and the AuxUE's spec has a training-domain record
// (the live view advertises its domain channels then).
func MonitorsDomain(cfg *runconfig.Config) bool {
	if cfg.Domain.Off {
		return false
	}
	_, err := cfg.ModelsConfig().AuxUESpec.DomainRecord()
	return err == nil
}

// newDomainMonitor builds a camera's monitor for rec (nil: none), with the
// threshold of domain.threshold: the number, else the camera's calibrated
// domain_threshold, else the record's at domain.false_alarm_rate.
func newDomainMonitor(rec *domain.Record, d runconfig.DomainConfig, cal alerts.Calibration) (*domainMonitor, error) {
	if rec == nil {
		return nil, nil
	}
	ex, err := domain.NewExtractor(rec.Layout)
	if err != nil {
		return nil, err
	}
	mc, source, err := domainSettings(rec, d, cal)
	if err != nil {
		return nil, err
	}
	mon, err := domain.NewMonitor(mc)
	if err != nil {
		return nil, err
	}
	m := &domainMonitor{rec: rec, ex: ex, scratch: rec.NewScratch(), stats: make([]float64, rec.Layout.Dim()), mon: mon}
	m.publishSettings(mc, source)
	return m, nil
}

// domainSettings is the monitor config the domain: section and the
// camera's calibration ask for, and where its threshold comes from.
func domainSettings(rec *domain.Record, d runconfig.DomainConfig, cal alerts.Calibration) (domain.MonitorConfig, string, error) {
	thr, source := d.Threshold.Value, "domain.threshold"
	switch {
	case thr > 0:
	case cal.DomainThreshold > 0:
		thr, source = cal.DomainThreshold, "calibration domain_threshold"
	default:
		var err error
		if thr, err = rec.Threshold(d.FalseAlarmRate); err != nil {
			return domain.MonitorConfig{}, "", fmt.Errorf("domain.threshold: %w", err)
		}
		source = fmt.Sprintf("the AuxUE's record at false_alarm_rate %g", d.FalseAlarmRate)
	}
	mc := domain.MonitorConfig{Window: d.Window, Threshold: thr, Persistence: d.PersistenceOrDefault()}
	return mc, source, mc.Validate()
}

// publishSettings stores what health, metrics and the debug page read of
// the monitor's config (other goroutines read the atomics, never mon).
func (m *domainMonitor) publishSettings(mc domain.MonitorConfig, source string) {
	m.source = source
	m.thrBits.Store(math.Float64bits(mc.Threshold))
	m.windowNS.Store(int64(mc.Window))
}

// domainReload is a kept camera's monitor settings after a reload,
// prepared before anything changes (nil: the camera has no monitor).
type domainReload struct {
	m      *domainMonitor
	cfg    domain.MonitorConfig
	source string
}

// checkDomainReload refuses the domain: keys a reload cannot change:
// domain.off (the record is read, and each camera's monitor built, at
// start). Every other key reloads (prepareDomainReload).
func checkDomainReload(running, next runconfig.DomainConfig) error {
	if running.Off != next.Off {
		return fmt.Errorf("domain.off: %v -> %v is not reloadable: the monitor is switched on or off when didoedge starts; restart it to apply (domain.window, threshold, false_alarm_rate, persistence and policy reload)",
			running.Off, next.Off)
	}
	return nil
}

// prepareDomainReload builds the camera's monitor settings for the new
// domain: section and its new calibration (a changed domain_threshold
// applies when domain.threshold is calibrated); it changes nothing.
func (c *cameraPipe) prepareDomainReload(d runconfig.DomainConfig, cal alerts.Calibration) (*domainReload, error) {
	m := c.dom
	if m == nil {
		return nil, nil
	}
	mc, source, err := domainSettings(m.rec, d, cal)
	if err != nil {
		return nil, err
	}
	return &domainReload{m: m, cfg: mc, source: source}, nil
}

// apply swaps the settings in on the scheduler goroutine (the monitor's):
// the window's frames and the shift state are kept, so that a wider
// window or a new threshold judges the frames already seen; a shift the
// new threshold no longer supports ends on the next frame (the engine's
// reload ended its episode already; one that still holds opens a new one).
func (r *domainReload) apply(log *slog.Logger, camera string) {
	if r == nil {
		return
	}
	old := r.m.mon.Config()
	if err := r.m.mon.SetConfig(r.cfg); err != nil { // validated when prepared
		log.Error("domain monitor settings not reloaded", "camera", camera, "err", err)
		return
	}
	r.m.publishSettings(r.cfg, r.source)
	if old != r.cfg {
		log.Info("domain monitor reloaded", "camera", camera, "window", r.cfg.Window, "threshold", r.cfg.Threshold,
			"threshold_from", r.source, "persistence", r.cfg.Persistence)
	}
}

// observeDomain measures the camera's assessed frame against the training
// domain and hands the reading to the engine before the zones are
// assessed (so that zone episodes opened now know the shift). It
// allocates nothing unless an event goes out.
func (c *cameraPipe) observeDomain(f *camera.Frame, rgb []uint8) {
	m := c.dom
	if m == nil || m.off.Load() {
		return
	}
	w, h := c.models.InputSize()
	df := infer.DomainFrame(c.models.modelMaps(), rgb, w, h)
	if m.rec.Layout.FeatureGroups > 0 && df.Features == nil {
		m.off.Store(true)
		c.p.log.Warn("domain monitor off: the AuxUE's record pools the depth model's feature tensor, which stays on the device (inference.device_tensors); set inference.device_tensors: off to monitor this camera",
			"camera", c.name)
		return
	}
	d := math.Inf(1) // statistics that cannot be taken count as foreign
	err := m.ex.Extract(&df, m.stats)
	if err == nil {
		d, err = m.rec.Distance(m.stats, m.scratch)
	}
	if err != nil {
		m.errs.Add(1)
		c.rl.Warn("domain statistics "+c.name, "domain monitor: frame not measured", "camera", c.name, "frame", f.Seq, "err", err)
	}
	r := m.observe(f.Capture, d)
	switch r.Transition {
	case domain.Began:
		c.p.log.Warn("domain shift: the camera's frames are unlike the models' training domain", "camera", c.name,
			"smoothed_distance", r.Smoothed, "threshold", r.Threshold, "window", r.Window, "threshold_from", m.source)
	case domain.Ended:
		c.p.log.Info("domain shift ended", "camera", c.name, "smoothed_distance", r.Smoothed, "threshold", r.Threshold)
	}
	if err := c.engine.ObserveDomain(alerts.Frame{Seq: f.Seq, Capture: f.Capture},
		alerts.DomainReading{Distance: r.Distance, Smoothed: r.Smoothed, Threshold: r.Threshold, Window: r.Window, Shifted: r.Shifted}); err != nil {
		c.engineError(f.Seq, err)
	}
}

// observe smooths the frame's distance d and publishes the reading to the
// atomics that health, metrics and the debug page read.
func (m *domainMonitor) observe(capture time.Time, d float64) domain.Reading {
	r := m.mon.Observe(capture, d)
	m.distBits.Store(math.Float64bits(r.Distance))
	m.smoothBits.Store(math.Float64bits(r.Smoothed))
	m.shifted.Store(r.Shifted)
	m.persistent.Store(r.Persistent)
	if r.Transition == domain.Began {
		m.shifts.Add(1)
		m.sinceNS.Store(r.Since.UnixNano())
	}
	return r
}

// DomainStatus is a camera's domain monitor as health and the debug page
// show it.
type DomainStatus struct {
	On         bool    `json:"on"`
	Distance   float64 `json:"distance"`
	Smoothed   float64 `json:"smoothed"`
	Threshold  float64 `json:"threshold"`
	WindowS    float64 `json:"window_s"`
	Shifted    bool    `json:"shifted"`
	Persistent bool    `json:"persistent"`
	SinceMS    int64   `json:"since_ms,omitempty"`
	Shifts     uint64  `json:"shifts"`
}

// domainStatusThreshold is the monitor's threshold.
func (m *domainMonitor) domainStatusThreshold() float64 {
	return math.Float64frombits(m.thrBits.Load())
}

// domainStatus reads the camera's monitor (any goroutine).
func (c *cameraPipe) domainStatus() DomainStatus {
	m := c.dom
	if m == nil || m.off.Load() {
		return DomainStatus{}
	}
	s := DomainStatus{On: true, Distance: finiteOr(math.Float64frombits(m.distBits.Load())),
		Smoothed: finiteOr(math.Float64frombits(m.smoothBits.Load())), Threshold: math.Float64frombits(m.thrBits.Load()),
		WindowS: time.Duration(m.windowNS.Load()).Seconds(), Shifted: m.shifted.Load(), Persistent: m.persistent.Load(), Shifts: m.shifts.Load()}
	if s.Shifted {
		s.SinceMS = time.Unix(0, m.sinceNS.Load()).UnixMilli()
	}
	return s
}

// finiteOr maps a non-finite reading (a frame whose statistics failed) to
// the largest float32, so that JSON can carry it.
func finiteOr(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return math.MaxFloat32
	}
	return v
}

// domainHealth is the camera's domain check: ok unless a shift outlasted
// domain.persistence (then degraded, with DomainDegradedReason).
func (c *cameraPipe) domainHealth() (ok bool, detail string) {
	s := c.domainStatus()
	switch {
	case !s.On:
		return true, "domain monitor off"
	case s.Persistent:
		return false, fmt.Sprintf("%s (domain shift for %s: distance %.3g over %gs above threshold %.3g)", DomainDegradedReason,
			time.Since(time.UnixMilli(s.SinceMS)).Round(time.Second), s.Smoothed, s.WindowS, s.Threshold)
	case s.Shifted:
		return true, fmt.Sprintf("domain shift: distance %.3g over %gs above threshold %.3g (degraded after domain.persistence)", s.Smoothed, s.WindowS, s.Threshold)
	}
	return true, fmt.Sprintf("frames like the training domain: distance %.3g over %gs, threshold %.3g", s.Smoothed, s.WindowS, s.Threshold)
}

// Domain is the camera's domain monitor now (On false when there is
// none): the debug page and the live view read it.
func (m *CameraMetrics) Domain() DomainStatus {
	if m.domain == nil {
		return DomainStatus{}
	}
	return m.domain()
}
