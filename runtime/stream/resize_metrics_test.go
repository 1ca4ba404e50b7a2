package stream

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/didoedge/didoedge/alerts"
)

// parseExposition parses the text exposition format with client_golang's
// own parser (prometheus/common/expfmt), as a Prometheus server would.
func parseExposition(t testing.TB, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, text)
	}
	return mfs
}

// sample finds the metric of family name whose labels include want.
func sample(mfs map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	mf := mfs[name]
	if mf == nil {
		return nil
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return -2
}

// TestMetricsExposition: per-camera series carry the camera label, the
// histograms' buckets are cumulative, and the Go and process collectors
// are there; the exposition is parsed by client_golang's text parser.
func TestMetricsExposition(t *testing.T) {
	m := NewMetrics()
	front, left := m.AddCamera("front"), m.AddCamera("left")
	for _, d := range []time.Duration{300 * time.Microsecond, 3 * time.Millisecond, 3 * time.Millisecond, 20 * time.Second} {
		front.Stages[StageDepth].Observe(d)
	}
	front.Dropped.Add(7)
	left.Dropped.Add(2)
	left.Frames.Add(5)
	m.Reloads.Add(1)
	m.SetProvider("depth", func() string { return "cpu" })
	m.Gauge("didoedge_outbox_pending", "pending", func() float64 { return 3 })
	front.countEvent(&alerts.Event{Type: alerts.EventNew, Level: alerts.LevelCritical})
	front.countEvent(&alerts.Event{Type: alerts.EventEnd, Level: alerts.LevelOK})
	left.countEvent(&alerts.Event{Type: alerts.EventNew, Level: alerts.LevelWarn})
	var b strings.Builder
	if _, err := m.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	mfs := parseExposition(t, b.String())
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"didoedge_frames_dropped_total", map[string]string{"camera": "front"}, 7},
		{"didoedge_frames_dropped_total", map[string]string{"camera": "left"}, 2},
		{"didoedge_frames_total", map[string]string{"camera": "left"}, 5},
		{"didoedge_frames_total", map[string]string{"camera": "front"}, 0},
		{"didoedge_events_total", map[string]string{"camera": "front", "level": "critical", "type": "new"}, 1},
		{"didoedge_events_total", map[string]string{"camera": "front", "level": "ok", "type": "end"}, 1},
		{"didoedge_events_total", map[string]string{"camera": "front", "level": "warn", "type": "new"}, 0},
		{"didoedge_events_total", map[string]string{"camera": "left", "level": "warn", "type": "new"}, 1},
		{"didoedge_config_reloads_total", nil, 1},
		{"didoedge_provider_info", map[string]string{"model": "depth", "provider": "cpu"}, 1},
		{"didoedge_outbox_pending", nil, 3},
	} {
		if got := value(sample(mfs, tc.name, tc.labels)); got != tc.want {
			t.Errorf("%s%v = %g, want %g", tc.name, tc.labels, got, tc.want)
		}
	}
	h := sample(mfs, "didoedge_stage_duration_seconds", map[string]string{"camera": "front", "stage": "depth"}).GetHistogram()
	if h.GetSampleCount() != 4 || h.GetSampleSum() < 20.0063-1e-9 || h.GetSampleSum() > 20.0063+1e-9 {
		t.Errorf("depth histogram count %d sum %g, want 4 and 20.0063", h.GetSampleCount(), h.GetSampleSum())
	}
	// Buckets are cumulative: 0.3 ms <= 0.0005; 3 ms <= 0.005; 20 s only in +Inf.
	wantBuckets := map[float64]uint64{0.0005: 1, 0.0025: 1, 0.005: 3, 10: 3}
	for _, bk := range h.GetBucket() {
		if w, ok := wantBuckets[bk.GetUpperBound()]; ok && bk.GetCumulativeCount() != w {
			t.Errorf("bucket le=%g: %d, want %d", bk.GetUpperBound(), bk.GetCumulativeCount(), w)
		}
	}
	if c := sample(mfs, "didoedge_stage_duration_seconds", map[string]string{"camera": "left", "stage": "auxue"}).GetHistogram().GetSampleCount(); c != 0 {
		t.Errorf("left auxue count %d, want 0", c)
	}
	for name, typ := range map[string]dto.MetricType{"didoedge_frames_total": dto.MetricType_COUNTER, "didoedge_fps": dto.MetricType_GAUGE,
		"didoedge_stage_duration_seconds": dto.MetricType_HISTOGRAM, "didoedge_frame_latency_seconds": dto.MetricType_HISTOGRAM,
		"go_goroutines": dto.MetricType_GAUGE, "process_resident_memory_bytes": dto.MetricType_GAUGE} {
		if mf := mfs[name]; mf == nil || mf.GetType() != typ {
			t.Errorf("family %s: %v, want type %v (families: %v)", name, mf, typ, slices.Sorted(maps.Keys(mfs)))
		}
	}
	// Every per-camera family has one series per camera.
	if n := len(mfs["didoedge_frame_latency_seconds"].GetMetric()); n != 2 {
		t.Errorf("%d latency series, want 2 (front, left)", n)
	}
}
