package alerts

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts/schema"
)

func confCal(tau float64, zones map[string]float64) Calibration {
	c := testCal()
	c.TauC, c.TauCZones = &tau, zones
	c.Levels.ConfidenceFraction = &Criterion{Warn: Hysteresis{0.3, 0.2}, Critical: Hysteresis{0.6, 0.5}}
	return c
}

// TestAssessConfidenceFraction: per zone, the share of pixels with a
// finite u whose u exceeds the zone's tau_c, counted by hand.
func TestAssessConfidenceFraction(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	m := Maps{Width: 4, Height: 2,
		Epistemic:  []float32{0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1},
		Depth:      []float32{10, 10, 10, 10, 10, 10, 10, 10},
		Scale:      []float32{1, 1, 1, 1, 1, 1, 1, 1},
		Confidence: []float32{0.05, 0.4, nan, 0.3, 0.25, 0.2, inf, 0.35},
	}
	zs := ZoneSet{Grid: &GridSpec{Rows: 1, Cols: 2}}
	zones, _, err := zs.Resolve("")
	if err != nil {
		t.Fatal(err)
	}
	// Zone r0c0 (pixels 0,1,4,5: u .05 .4 .25 .2) at tau_c 0.22: 2 of 4.
	// Zone r0c1 (pixels 2,3,6,7: NaN .3 Inf .35) at its own tau_c 0.32:
	// 1 of the 2 finite.
	a, err := NewAssessor(zones, nil, confCal(0.22, map[string]float64{"r0c1": 0.32}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.Assess(m)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].ConfidenceValid != 4 || got[0].ConfidenceFraction != 0.5 || got[1].ConfidenceValid != 2 || got[1].ConfidenceFraction != 0.5 {
		t.Fatalf("zones %+v\n%+v", got[0], got[1])
	}
	// Without a confidence map: nothing counted.
	m.Confidence = nil
	if got, err = a.Assess(m); err != nil || got[0].ConfidenceValid != 0 || got[0].ConfidenceFraction != 0 {
		t.Fatalf("no map: %v %+v", err, got[0])
	}
	m.Confidence = make([]float32, 3)
	if _, err := a.Assess(m); err == nil || !strings.Contains(err.Error(), "confidence map of 3 values, want 8") {
		t.Fatalf("short map: %v", err)
	}
}

// TestConfidenceCalibrationErrors: tau_c's keys are checked with the
// criterion, naming the key.
func TestConfidenceCalibrationErrors(t *testing.T) {
	const crit = "  confidence_fraction: {warn: {enter: 0.1, exit: 0.05}, critical: {enter: 0.3, exit: 0.2}}\n"
	for _, tc := range []struct{ doc, want string }{
		{validCal + "", ""},
		{strings.Replace(validCal, "levels:\n", "levels:\n"+crit, 1), "cal.yaml: tau_c: missing"},
		{strings.Replace(validCal, "tau_a: 0.15", "tau_a: 0.15\ntau_c: 0.2", 1), "cal.yaml: tau_c: set, but levels.confidence_fraction is not"},
		{strings.Replace(strings.Replace(validCal, "levels:\n", "levels:\n"+crit, 1), "tau_a: 0.15", "tau_a: 0.15\ntau_c: .nan", 1), "cal.yaml: tau_c: NaN is not finite"},
		{strings.Replace(strings.Replace(validCal, "levels:\n", "levels:\n"+crit, 1), "tau_a: 0.15", "tau_a: 0.15\ntau_c: 0.2\ntau_c_zones: {Lane: 1}", 1), "cal.yaml: tau_c_zones.Lane: not a valid zone name"},
		{strings.Replace(strings.Replace(validCal, "levels:\n", "levels:\n"+strings.Replace(crit, "exit: 0.05", "exit: 0.5", 1), 1), "tau_a: 0.15", "tau_a: 0.15\ntau_c: 0.2", 1),
			"cal.yaml: levels.confidence_fraction.warn.exit: 0.5 above enter 0.1"},
	} {
		_, err := ParseCalibration("cal.yaml", []byte(tc.doc))
		if tc.want == "" {
			if err != nil {
				t.Errorf("valid calibration: %v", err)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("error %v, want prefix %q", err, tc.want)
		}
	}
	// A valid one round-trips, with its per-zone threshold.
	c := confCal(-0.1, map[string]float64{"lane": 0.4})
	var b strings.Builder
	if err := WriteCalibration(&b, c); err != nil {
		t.Fatal(err)
	}
	back, err := ParseCalibration("back.yaml", []byte(b.String()))
	if err != nil || back.TauCFor("lane") != 0.4 || back.TauCFor("other") != -0.1 || !back.UsesConfidence() {
		t.Fatalf("round trip: %v %+v", err, back)
	}
}

// TestEngineConfidenceCriterion: a zone whose confidence_fraction rises
// past warn opens an episode whose reason is confidence_fraction, with
// the fraction in the event's metrics (valid against the published
// schema); frames without a confidence map hold no level from it.
func TestEngineConfidenceCriterion(t *testing.T) {
	cal := confCal(0.5, nil)
	cal.Levels.OODFraction = &Criterion{Warn: Hysteresis{0.3, 0.2}, Critical: Hysteresis{0.6, 0.5}}
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	zones := []Zone{{Name: "all", Polygon: [][2]float64{{0, 0}, {1, 0}, {1, 1}, {0, 1}}}}
	rec := &recorder{}
	e, err := NewEngine(EngineSpec{Config: EngineConfig{Vehicle: "van-1", Camera: "front", StallAfter: 2 * time.Second, Now: clock.now},
		Zones: zones, Calibration: cal}, rec)
	if err != nil {
		t.Fatal(err)
	}
	base := clock.t
	m := Maps{Width: 10, Height: 1, Epistemic: make([]float32, 10), Scale: make([]float32, 10), Depth: make([]float32, 10), Confidence: make([]float32, 10)}
	frame := func(seq uint64, tenths int, withConf bool) []Event {
		t.Helper()
		for i := range m.Epistemic {
			m.Epistemic[i], m.Depth[i], m.Scale[i], m.Confidence[i] = 0.1, 50, 0.1, 0.2
			if i < tenths {
				m.Confidence[i] = 0.9
			}
		}
		mm := m
		if !withConf {
			mm.Confidence = nil
		}
		capture := base.Add(time.Duration(seq) * 100 * time.Millisecond)
		clock.t = capture.Add(20 * time.Millisecond)
		n := len(rec.events)
		if err := e.Observe(Frame{Seq: seq, Capture: capture, Camera: "front"}, mm); err != nil {
			t.Fatal(err)
		}
		return rec.events[n:]
	}
	if evs := frame(0, 2, true); len(evs) != 0 {
		t.Fatalf("0.2 below warn 0.3: %+v", evs)
	}
	evs := frame(1, 4, true)
	if len(evs) != 1 || evs[0].Level != LevelWarn || !slices.Equal(evs[0].Reasons, []string{"confidence_fraction"}) ||
		evs[0].Metrics.ConfidenceFraction == nil || *evs[0].Metrics.ConfidenceFraction != 0.4 ||
		evs[0].Metrics.Fused.ConfidenceFraction == nil || *evs[0].Metrics.Fused.ConfidenceFraction != 0.4 {
		t.Fatalf("0.4 above warn 0.3: %+v", evs)
	}
	ev := evs[0]
	ev.Seq = 1 // the outbox numbers events from 1 when it publishes them
	data, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := schema.Load(schema.Event)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Validate(data); err != nil {
		t.Fatalf("event against event.v1.json: %v\n%s", err, data)
	}
	if st := e.ZoneStatus(0); st.Level != LevelWarn || !st.Fused.HasConfidence || st.Fused.ConfidenceFraction != 0.4 {
		t.Fatalf("status %+v", st)
	}
	// The same pixels without a confidence map: the criterion drops.
	frame(2, 9, false)
	frame(3, 9, false)
	if st := e.ZoneStatus(0); st.Level != LevelOK {
		t.Fatalf("without a confidence map the zone stays %v", st.Level)
	}
}
