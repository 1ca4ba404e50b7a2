package runtime

import (
	"bufio"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
)

// promLine is one sample line of the text exposition format.
var promLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"]*")*)\})? (\S+)$`)

func TestMetricsExposition(t *testing.T) {
	var m Metrics
	for _, d := range []time.Duration{300 * time.Microsecond, 3 * time.Millisecond, 3 * time.Millisecond, 20 * time.Second} {
		m.Stages[StageDepth].Observe(d)
	}
	m.Dropped.Add(7)
	m.SetProvider("depth", "cpu")
	m.Gauge("didoedge_outbox_pending", "pending", func() float64 { return 3 })
	m.countEvent(&alerts.Event{Type: alerts.EventNew, Level: alerts.LevelCritical})
	m.countEvent(&alerts.Event{Type: alerts.EventEnd, Level: alerts.LevelOK})
	var b strings.Builder
	if _, err := m.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	samples := map[string]string{}
	typed := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "# TYPE ") {
			f := strings.Fields(line)
			typed[f[2]] = f[3]
			continue
		}
		if strings.HasPrefix(line, "# HELP ") {
			continue
		}
		g := promLine.FindStringSubmatch(line)
		if g == nil {
			t.Fatalf("malformed exposition line %q", line)
		}
		if _, err := strconv.ParseFloat(g[5], 64); err != nil && g[5] != "+Inf" {
			t.Fatalf("bad value in %q", line)
		}
		samples[g[1]+g[2]] = g[5]
	}
	want := map[string]string{
		`didoedge_frames_dropped_total`: "7",
		// Buckets are cumulative: 0.3 ms <= 0.0005; 3 ms <= 0.005; 20 s only in +Inf.
		`didoedge_stage_duration_seconds_bucket{stage="depth",le="0.0005"}`: "1",
		`didoedge_stage_duration_seconds_bucket{stage="depth",le="0.0025"}`: "1",
		`didoedge_stage_duration_seconds_bucket{stage="depth",le="0.005"}`:  "3",
		`didoedge_stage_duration_seconds_bucket{stage="depth",le="10"}`:     "3",
		`didoedge_stage_duration_seconds_bucket{stage="depth",le="+Inf"}`:   "4",
		`didoedge_stage_duration_seconds_count{stage="depth"}`:              "4",
		`didoedge_stage_duration_seconds_sum{stage="depth"}`:                "20.0063",
		`didoedge_stage_duration_seconds_count{stage="auxue"}`:              "0",
		`didoedge_events_total{level="critical",type="new"}`:                "1",
		`didoedge_events_total{level="ok",type="end"}`:                      "1",
		`didoedge_events_total{level="warn",type="new"}`:                    "0",
		`didoedge_provider_info{model="depth",provider="cpu"}`:              "1",
		`didoedge_outbox_pending`:                                           "3",
	}
	for k, v := range want {
		if samples[k] != v {
			t.Errorf("%s = %q, want %q", k, samples[k], v)
		}
	}
	for name, typ := range map[string]string{"didoedge_frames_total": "counter", "didoedge_fps": "gauge",
		"didoedge_stage_duration_seconds": "histogram", "didoedge_frame_latency_seconds": "histogram"} {
		if typed[name] != typ {
			t.Errorf("TYPE of %s = %q, want %q", name, typed[name], typ)
		}
	}
}
