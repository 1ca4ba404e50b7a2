package schema_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/schema"
)

func mustLoad(t *testing.T, name string) *schema.Schema {
	t.Helper()
	s, err := schema.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// snapshotNamer stands in for the snapshot renderer and the MQTT sink:
// it names the snapshot's path and topic in the event.
type snapshotNamer struct{}

func (snapshotNamer) Event(*alerts.Event) error { return nil }
func (snapshotNamer) State(*alerts.State) error { return nil }
func (snapshotNamer) Snapshot(s *alerts.Snapshot) error {
	s.Event.Snapshot.Path = "/api/events/" + s.Event.ID + "/snapshot.jpg"
	s.Event.Snapshot.Topic = "didoedge/van-07/front/" + s.Zone.Name + "/snapshot"
	return nil
}

// realPayloads runs an engine through an episode, a camera stall and the
// stats, and returns the JSON it produces.
func realPayloads(t *testing.T) (events, states, stats [][]byte) {
	t.Helper()
	now := time.Unix(1_700_000_000, 0)
	cal := alerts.DefaultCalibration()
	zs := alerts.ZoneSet{Grid: &alerts.GridSpec{Rows: 1, Cols: 2}}
	zones, _, err := zs.Resolve("")
	if err != nil {
		t.Fatal(err)
	}
	var seq uint64
	var evs []alerts.Event
	record := alerts.SinkFuncs{
		OnEvent: func(ev *alerts.Event) error {
			seq++
			ev.Seq = seq
			b, _ := json.Marshal(ev)
			events = append(events, b)
			evs = append(evs, *ev)
			return nil
		},
		OnState: func(st *alerts.State) error {
			b, _ := json.Marshal(st)
			states = append(states, b)
			return nil
		},
	}
	e, err := alerts.NewEngine(alerts.EngineSpec{Config: alerts.EngineConfig{Vehicle: "van-07", Camera: "front",
		Timing:         alerts.Timing{FusionTimeConstant: 100 * time.Millisecond},
		UpdateInterval: 100 * time.Millisecond, StallAfter: time.Second, Now: func() time.Time { return now }},
		Zones: zones, Calibration: cal}, alerts.Sinks{snapshotNamer{}, record})
	if err != nil {
		t.Fatal(err)
	}
	m := alerts.Maps{Width: 4, Height: 2, Epistemic: make([]float32, 8), Scale: make([]float32, 8), Depth: make([]float32, 8)}
	img := alerts.Image{Width: 4, Height: 2, RGB: make([]uint8, 24)}
	for i, level := range []float32{0.1, 0.9, 0.9, 0.1, 0.1} {
		for p := range m.Depth {
			m.Epistemic[p], m.Depth[p], m.Scale[p] = level, 30, 0.5
		}
		m.Depth[7] = float32(0) // invalid pixel in zone r0c1
		now = now.Add(200 * time.Millisecond)
		if err := e.Observe(alerts.Frame{Seq: uint64(i), Capture: now, Image: &img}, m); err != nil {
			t.Fatal(err)
		}
	}
	// A domain shift: its new, update and end events, and a zone episode
	// opened while it is open (domain_shift: true).
	for i, shifted := range []bool{true, true, true, false} {
		now = now.Add(200 * time.Millisecond)
		f := alerts.Frame{Seq: uint64(10 + i), Capture: now, Image: &img}
		if err := e.ObserveDomain(f, alerts.DomainReading{Distance: 3.5, Smoothed: 2.25, Threshold: 1.5, Window: time.Second, Shifted: shifted}); err != nil {
			t.Fatal(err)
		}
		for p := range m.Depth {
			m.Epistemic[p] = 0.9
		}
		if err := e.Observe(f, m); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(2 * time.Second)
	if err := e.Tick(now); err != nil {
		t.Fatal(err)
	}
	types := map[alerts.EventType]bool{}
	domainTypes := map[alerts.EventType]bool{}
	snap, flagged := false, false
	for _, ev := range evs {
		types[ev.Type] = true
		snap = snap || ev.Snapshot != nil
		flagged = flagged || (ev.Kind == alerts.KindZone && ev.DomainShift)
		if ev.Kind == alerts.KindDomainShift {
			domainTypes[ev.Type] = true
		}
	}
	if !types[alerts.EventNew] || !types[alerts.EventUpdate] || !types[alerts.EventEnd] || evs[len(evs)-1].Kind != alerts.KindCameraFault || !snap {
		t.Fatalf("fixture did not produce every event type and a snapshot: %+v", evs)
	}
	if !domainTypes[alerts.EventNew] || !domainTypes[alerts.EventUpdate] || !domainTypes[alerts.EventEnd] || !flagged {
		t.Fatalf("fixture did not produce every domain_shift event type and a flagged zone episode: %+v", evs)
	}
	st := e.Stats(now)
	b, _ := json.Marshal(&st)
	stats = append(stats, b)
	return events, states, stats
}

func TestRealPayloadsValidate(t *testing.T) {
	events, states, stats := realPayloads(t)
	for name, docs := range map[string][][]byte{schema.Event: events, schema.State: states, schema.Stats: stats} {
		s := mustLoad(t, name)
		for _, d := range docs {
			if err := s.Validate(d); err != nil {
				t.Errorf("%s rejects a real payload: %v\n%s", name, err, d)
			}
		}
	}
	av := mustLoad(t, schema.Availability)
	for _, word := range []string{"online", "offline"} {
		if err := av.Validate([]byte(`"` + word + `"`)); err != nil {
			t.Error(err)
		}
	}
}

func TestWrongPayloadsRejected(t *testing.T) {
	events, _, stats := realPayloads(t)
	ev, st := string(events[0]), string(stats[0])
	tests := []struct {
		name, schema, doc, want string
	}{
		{"missing required", schema.Event, strings.Replace(ev, `"seq":1,`, "", 1), `missing required property "seq"`},
		{"seq zero", schema.Event, strings.Replace(ev, `"seq":1,`, `"seq":0,`, 1), "below minimum"},
		{"seq fraction", schema.Event, strings.Replace(ev, `"seq":1,`, `"seq":1.5,`, 1), "type number, want integer"},
		{"extra property", schema.Event, strings.Replace(ev, `"seq":1,`, `"seq":1,"colour":"red",`, 1), `property "colour" not allowed`},
		{"bad enum", schema.Event, strings.Replace(ev, `"type":"new"`, `"type":"begin"`, 1), "not in enum"},
		{"bad const", schema.Event, strings.Replace(ev, `"didoedge.event/1"`, `"didoedge.event/2"`, 1), "must be didoedge.event/1"},
		{"bad pattern", schema.Event, strings.Replace(ev, `"camera":"front"`, `"camera":"front/left"`, 1), "does not match"},
		{"bad type", schema.Event, strings.Replace(ev, `"vehicle":"van-07"`, `"vehicle":7`, 1), "type integer, want string"},
		{"nested maximum", schema.Event, strings.Replace(ev, `"ood_fraction":1`, `"ood_fraction":1.5`, 1), "above maximum"},
		{"bad item", schema.Event, strings.Replace(ev, `"reasons":["ood_fraction"]`, `"reasons":["vibes"]`, 1), "/reasons/0"},
		{"null not allowed", schema.Stats, strings.Replace(st, `"fps":`, `"fps":null,"x":`, 1), "type null, want number"},
		{"availability", schema.Availability, `"maybe"`, "not in enum"},
		{"domain reading incomplete", schema.Event, strings.Replace(domainEvent(t, events), `"window_s":1`, `"windowed":1`, 1), `property "windowed" not allowed`},
		{"domain distance negative", schema.Event, strings.Replace(domainEvent(t, events), `"distance":3.5`, `"distance":-3.5`, 1), "below minimum"},
		{"domain_shift not boolean", schema.Event, strings.Replace(ev, `"reasons"`, `"domain_shift":"yes","reasons"`, 1), "type string, want boolean"},
		{"not json", schema.Event, `{"seq":`, "invalid JSON"},
		{"trailing", schema.Availability, `"online" "offline"`, "trailing data"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.doc == ev || tc.doc == st {
				t.Fatal("the mutation did not apply; fix the test")
			}
			err := mustLoad(t, tc.schema).Validate([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q\n%s", err, tc.want, tc.doc)
			}
		})
	}
}

func TestCompileRejectsUnsupportedKeywords(t *testing.T) {
	for _, doc := range []string{
		`{"type":"string","minLength":3}`,
		`{"type":"object","additionalProperties":{"type":"string"}}`,
		`{"type":"strnig"}`,
		`{"$ref":"#/x"}`,
		`[]`,
	} {
		if _, err := schema.Compile([]byte(doc)); err == nil {
			t.Errorf("schema %s compiled", doc)
		}
	}
	if got := len(schema.Names()); got != 5 {
		t.Fatalf("%d embedded schemas, want 5", got)
	}
}

// domainEvent is the first domain_shift event of the payloads.
func domainEvent(t *testing.T, events [][]byte) string {
	t.Helper()
	for _, e := range events {
		if strings.Contains(string(e), `"kind":"domain_shift"`) {
			return string(e)
		}
	}
	t.Fatal("no domain_shift event")
	return ""
}
