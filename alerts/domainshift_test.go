package alerts

import (
	"testing"
	"time"
)

// domainRun feeds 20 frames at 10 fps whose K/S is high in every pixel
// (the zone's target is critical), with the camera shifted on frames
// 0-9, and returns the events.
func domainRun(t *testing.T, policy DomainPolicy) []Event {
	t.Helper()
	now := time.Unix(1_700_000_000, 0)
	zs := ZoneSet{Grid: &GridSpec{Rows: 1, Cols: 1}}
	zones, _, err := zs.Resolve("")
	if err != nil {
		t.Fatal(err)
	}
	var evs []Event
	sink := SinkFuncs{OnEvent: func(ev *Event) error { evs = append(evs, *ev); return nil }}
	e, err := NewEngine(EngineSpec{Config: EngineConfig{Vehicle: "v", Camera: "front", DomainPolicy: policy,
		Now: func() time.Time { return now }}, Zones: zones, Calibration: DefaultCalibration()}, sink)
	if err != nil {
		t.Fatal(err)
	}
	m := Maps{Width: 4, Height: 2, Epistemic: make([]float32, 8), Scale: make([]float32, 8), Depth: make([]float32, 8)}
	for p := range m.Depth {
		m.Epistemic[p], m.Depth[p], m.Scale[p] = 0.95, 30, 0.5
	}
	for i := range 20 {
		now = now.Add(100 * time.Millisecond)
		f := Frame{Seq: uint64(i + 1), Capture: now}
		if err := e.ObserveDomain(f, DomainReading{Distance: 4, Smoothed: 3, Threshold: 2, Window: time.Second, Shifted: i < 10}); err != nil {
			t.Fatal(err)
		}
		if err := e.Observe(f, m); err != nil {
			t.Fatal(err)
		}
	}
	return evs
}

func TestDomainShiftPolicies(t *testing.T) {
	for _, c := range []struct {
		policy DomainPolicy
		// the zone episode's first frame and its domain_shift flag
		zoneFrame uint64
		flagged   bool
	}{{"", 1, true}, {DomainFlag, 1, true}, {DomainSuppress, 11, false}} {
		evs := domainRun(t, c.policy)
		var domain, zone []Event
		for _, ev := range evs {
			switch ev.Kind {
			case KindDomainShift:
				domain = append(domain, ev)
			case KindZone:
				zone = append(zone, ev)
			}
		}
		if len(domain) != 2 || domain[0].Type != EventNew || domain[1].Type != EventEnd || domain[0].ID != domain[1].ID ||
			domain[0].FrameSeq != 1 || domain[1].FrameSeq != 11 {
			t.Fatalf("policy %q: domain_shift events %+v, want new at frame 1 and end at frame 11", c.policy, domain)
		}
		d := domain[0].Domain
		if d == nil || d.Distance != 4 || d.Smoothed != 3 || d.Threshold != 2 || d.WindowS != 1 || domain[0].Level != LevelWarn ||
			len(domain[0].Reasons) != 1 || domain[0].Reasons[0] != ReasonDomainDistance {
			t.Errorf("policy %q: new event %+v (domain %+v)", c.policy, domain[0], d)
		}
		if len(zone) == 0 || zone[0].Type != EventNew || zone[0].FrameSeq != c.zoneFrame || zone[0].DomainShift != c.flagged {
			t.Fatalf("policy %q: zone events %+v, want a new event at frame %d with domain_shift %v", c.policy, zone, c.zoneFrame, c.flagged)
		}
	}
	if err := DomainPolicy("ignore").Validate("domain.policy"); err == nil || err.Error() != `domain.policy: "ignore", want flag or suppress` {
		t.Errorf("bad policy: %v", err)
	}
}

// TestDomainShiftEndsOnClose: an open domain_shift episode ends when the
// engine closes, so that no subscriber keeps it forever.
func TestDomainShiftEndsOnClose(t *testing.T) {
	var evs []Event
	zones, _, err := ZoneSet{Grid: &GridSpec{Rows: 1, Cols: 1}}.Resolve("")
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(EngineSpec{Config: EngineConfig{Camera: "front"}, Zones: zones, Calibration: DefaultCalibration()},
		SinkFuncs{OnEvent: func(ev *Event) error { evs = append(evs, *ev); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(100, 0)
	if err := e.ObserveDomain(Frame{Seq: 1, Capture: now}, DomainReading{Distance: 9, Smoothed: 9, Threshold: 2, Window: time.Second, Shifted: true}); err != nil {
		t.Fatal(err)
	}
	if !e.DomainShifted() {
		t.Fatal("not shifted")
	}
	if err := e.Close(now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[1].Kind != KindDomainShift || evs[1].Type != EventEnd || e.DomainShifted() {
		t.Errorf("events %+v", evs)
	}
}
