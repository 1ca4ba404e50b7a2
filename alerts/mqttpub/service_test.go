package mqttpub

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/schema"
)

// serviceConfig: vehicle van-1, camera front, topic prefix svc, a 1x2 grid
// over a 4x1 map (r0c0: pixels 0-1, r0c1: pixels 2-3), default
// calibration (tau_e 0.5, ood_fraction critical from 0.2), no fusion, no
// inertia, no merge window, and the embedded broker on a free port of
// 127.0.0.1.
func serviceConfig(t testing.TB) testSection {
	t.Helper()
	yaml := fmt.Sprintf(`vehicle: van-1
camera: front
topic_prefix: svc
grid: {rows: 1, cols: 2}
events: {fusion_time_constant: 0s, exit_inertia: 0s, critical_enter_inertia: 0s, min_episode: 0s, merge_window: 0s, camera_stall: 2s}
mqtt: {broker: embedded, client_id: svc-test, stats_interval: 1h, close_timeout: 2s}
outbox: {dir: %q}
embedded: {listen: "127.0.0.1:0", allow_anonymous: true}
`, t.TempDir())
	cfg, err := parseTestSection("service test", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// serviceStep is one call on the service.
type serviceStep struct {
	op     string                 // "frame", "stall" (a Tick a minute late) or "reload"
	hot    int                    // frame: pixels 0..hot-1 of 4 have K/S 0.9 > tau_e, the rest 0.1
	edit   func(c *alerts.Config) // reload: edits a copy of the started config
	errHas string                 // reload: the error must contain it
}

// wantEvent describes an event the hook and the subscriber must see.
type wantEvent struct {
	typ         alerts.EventType
	kind        alerts.EventKind
	zone        string
	level, prev alerts.Level
	sameID      int  // index of the earlier event whose episode this one continues; -1: a new episode
	fromReload  bool // ended by Reload: no metrics
}

func TestServiceHookAndReload(t *testing.T) {
	full := [][2]float64{{0, 0}, {1, 0}, {1, 1}, {0, 1}}
	for _, tc := range []struct {
		name   string
		key    string
		steps  []serviceStep
		events []wantEvent
		zones  []string
		states map[string]alerts.Level // retained zone states on the broker at the end
	}{
		{
			name: "reload ends an open zone episode and turns its state ok",
			steps: []serviceStep{
				{op: "frame", hot: 2},
				{op: "reload", edit: func(c *alerts.Config) {
					c.Grid, c.Zones = nil, []alerts.ZoneSpec{{Name: "wide", Polygon: full}}
				}},
				{op: "frame", hot: 4},
			},
			events: []wantEvent{
				{alerts.EventNew, alerts.KindZone, "r0c0", alerts.LevelCritical, alerts.LevelOK, -1, false},
				{alerts.EventEnd, alerts.KindZone, "r0c0", alerts.LevelOK, alerts.LevelCritical, 0, true},
				{alerts.EventNew, alerts.KindZone, "wide", alerts.LevelCritical, alerts.LevelOK, -1, false},
			},
			zones:  []string{"wide"},
			states: map[string]alerts.Level{"r0c0": alerts.LevelOK, "r0c1": alerts.LevelOK, "wide": alerts.LevelCritical},
		},
		{
			name: "reload during a camera stall ends the fault",
			steps: []serviceStep{
				{op: "frame", hot: 0},
				{op: "stall"},
				{op: "reload", edit: func(c *alerts.Config) {}},
				{op: "stall"},
			},
			events: []wantEvent{
				{alerts.EventNew, alerts.KindCameraFault, "", alerts.LevelCritical, alerts.LevelOK, -1, false},
				{alerts.EventEnd, alerts.KindCameraFault, "", alerts.LevelOK, alerts.LevelCritical, 0, true},
				{alerts.EventNew, alerts.KindCameraFault, "", alerts.LevelCritical, alerts.LevelOK, -1, false},
			},
			zones:  []string{"r0c0", "r0c1"},
			states: map[string]alerts.Level{"r0c0": alerts.LevelOK, "r0c1": alerts.LevelOK},
		},
		{
			name: "a refused reload keeps the running engine and its episode",
			steps: []serviceStep{
				{op: "frame", hot: 2},
				{op: "reload", edit: func(c *alerts.Config) { c.Calibration = "/nonexistent/cal.yaml" }, errHas: "/nonexistent/cal.yaml"},
				{op: "frame", hot: 0},
			},
			events: []wantEvent{
				{alerts.EventNew, alerts.KindZone, "r0c0", alerts.LevelCritical, alerts.LevelOK, -1, false},
				{alerts.EventEnd, alerts.KindZone, "r0c0", alerts.LevelOK, alerts.LevelCritical, 0, false},
			},
			zones:  []string{"r0c0", "r0c1"},
			states: map[string]alerts.Level{"r0c0": alerts.LevelOK, "r0c1": alerts.LevelOK},
		},
		{
			name: "zone errors name the config key",
			key:  "alerts",
			steps: []serviceStep{
				{op: "reload", edit: func(c *alerts.Config) { c.Grid = &alerts.GridSpec{Rows: 17, Cols: 1} }, errHas: "alerts.grid.rows: 17"},
			},
			zones:  []string{"r0c0", "r0c1"},
			states: map[string]alerts.Level{"r0c0": alerts.LevelOK, "r0c1": alerts.LevelOK},
		},
		{
			// 100 ms of entry inertia after the reload: the first hot
			// frame raises nothing, the second (100 ms later) does.
			// Vehicle and camera changes are not applied: the event still
			// comes from van-1/front on the same topics.
			name: "reload applies events settings and keeps the identity",
			steps: []serviceStep{
				{op: "reload", edit: func(c *alerts.Config) {
					enter := 100 * time.Millisecond
					c.Vehicle, c.Camera, c.Events.EnterInertia = "other-van", "rear", &enter
				}},
				{op: "frame", hot: 2},
				{op: "frame", hot: 2},
			},
			events: []wantEvent{
				{alerts.EventNew, alerts.KindZone, "r0c0", alerts.LevelCritical, alerts.LevelOK, -1, false},
			},
			zones:  []string{"r0c0", "r0c1"},
			states: map[string]alerts.Level{"r0c0": alerts.LevelCritical, "r0c1": alerts.LevelOK},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := serviceConfig(t)
			var seen []alerts.Event
			hook := alerts.SinkFuncs{OnEvent: func(ev *alerts.Event) error { seen = append(seen, *ev); return nil }}
			svc, err := Start(context.Background(), cfg.Topics(), cfg.ServiceConfig, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := svc.Close(context.Background()); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			spec, err := cfg.EngineSpec(tc.key)
			if err != nil {
				t.Fatal(err)
			}
			eng, err := alerts.NewEngine(spec, alerts.Sinks{svc, hook})
			if err != nil {
				t.Fatal(err)
			}
			host, port, _ := strings.Cut(svc.BrokerAddr(), ":")
			topics := cfg.Topics()
			sub := startSubscriber(t, "-h", host, "-p", port, "-q", "1", "-t", topics.Events(cfg.Camera))

			m := alerts.Maps{Width: 4, Height: 1, Epistemic: make([]float32, 4), Scale: make([]float32, 4), Depth: make([]float32, 4)}
			base := time.Now()
			var seq uint64
			stalls := 0
			for i, st := range tc.steps {
				switch st.op {
				case "frame":
					for p := range m.Epistemic {
						m.Epistemic[p], m.Scale[p], m.Depth[p] = 0.1, 0.1, 50
						if p < st.hot {
							m.Epistemic[p] = 0.9
						}
					}
					seq++
					if err := eng.Observe(alerts.Frame{Seq: seq, Capture: base.Add(time.Duration(seq) * 100 * time.Millisecond)}, m); err != nil {
						t.Fatalf("step %d: frame: %v", i, err)
					}
				case "stall":
					// A minute more per stall: the id differs by the time.
					stalls++
					if err := eng.Tick(time.Now().Add(time.Duration(stalls) * time.Minute)); err != nil {
						t.Fatalf("step %d: tick: %v", i, err)
					}
				case "reload":
					c := cfg
					st.edit(&c.Config)
					spec, err := c.EngineSpec(tc.key)
					if err == nil {
						err = eng.Reload(spec, time.Now())
					}
					switch {
					case st.errHas == "" && err != nil:
						t.Fatalf("step %d: reload: %v", i, err)
					case st.errHas != "" && (err == nil || !strings.Contains(err.Error(), st.errHas)):
						t.Fatalf("step %d: reload error %v, want one containing %q", i, err, st.errHas)
					}
				default:
					t.Fatalf("step %d: unknown op %q", i, st.op)
				}
			}

			checkHookEvents(t, seen, tc.events)
			var names []string
			for i, z := range eng.Zones() {
				names = append(names, z.Name)
				if st := eng.ZoneStatus(i); st.Name != z.Name {
					t.Errorf("zone status %d: %+v, zone %q", i, st, z.Name)
				}
			}
			if !slices.Equal(names, tc.zones) {
				t.Errorf("zones %v, want %v", names, tc.zones)
			}
			if got := eng.Config(); got.Vehicle != cfg.Vehicle || got.Camera != cfg.Camera {
				t.Errorf("engine identity %s/%s, want %s/%s", got.Vehicle, got.Camera, cfg.Vehicle, cfg.Camera)
			}

			// The broker delivers the same events, in order, valid to the schema.
			sub.waitFor(t, 10*time.Second, fmt.Sprintf("%d events", len(seen)), func() bool { return len(sub.msgs) >= len(seen) })
			sch, err := schema.Load(schema.Event)
			if err != nil {
				t.Fatal(err)
			}
			msgs := sub.messages()
			if len(msgs) != len(seen) {
				t.Fatalf("broker delivered %d events, the hook saw %d", len(msgs), len(seen))
			}
			for i, msg := range msgs {
				if err := sch.Validate([]byte(msg.payload)); err != nil {
					t.Errorf("event %d: %v\n%s", i, err, msg.payload)
				}
				var ev alerts.Event
				if err := json.Unmarshal([]byte(msg.payload), &ev); err != nil {
					t.Fatal(err)
				}
				h := seen[i]
				if ev.Seq != h.Seq || ev.ID != h.ID || ev.Type != h.Type || ev.Level != h.Level || ev.Zone != h.Zone {
					t.Errorf("event %d on the broker %+v, hook %+v", i, ev, h)
				}
			}

			// Retained states, as a subscriber connecting now gets them.
			ss := startSubscriber(t, "-h", host, "-p", port, "-q", "1", "-t", topics.ZoneState(cfg.Camera, "+"))
			last := map[string]alerts.State{}
			ss.waitFor(t, 10*time.Second, fmt.Sprintf("zone states %v", tc.states), func() bool {
				for _, msg := range ss.msgs {
					var st alerts.State
					if json.Unmarshal([]byte(msg.payload), &st) == nil {
						last[st.Zone] = st
					}
				}
				if len(last) != len(tc.states) {
					return false
				}
				for z, l := range tc.states {
					if st, ok := last[z]; !ok || st.Level != l {
						return false
					}
				}
				return true
			})
			stSchema, err := schema.Load(schema.State)
			if err != nil {
				t.Fatal(err)
			}
			for _, msg := range ss.messages() {
				if err := stSchema.Validate([]byte(msg.payload)); err != nil {
					t.Errorf("state on %s: %v\n%s", msg.topic, err, msg.payload)
				}
			}
		})
	}
}

func checkHookEvents(t *testing.T, seen []alerts.Event, want []wantEvent) {
	t.Helper()
	if len(seen) != len(want) {
		t.Fatalf("hook saw %d events, want %d: %+v", len(seen), len(want), seen)
	}
	for i, w := range want {
		ev := seen[i]
		if ev.Type != w.typ || ev.Kind != w.kind || ev.Zone != w.zone || ev.Level != w.level || ev.Previous != w.prev {
			t.Errorf("event %d: %s %s zone %q %v<-%v, want %s %s zone %q %v<-%v", i,
				ev.Type, ev.Kind, ev.Zone, ev.Level, ev.Previous, w.typ, w.kind, w.zone, w.level, w.prev)
		}
		if ev.Seq != uint64(i+1) {
			t.Errorf("event %d: seq %d, want %d (assigned before the hook)", i, ev.Seq, i+1)
		}
		if ev.Vehicle != "van-1" || ev.Camera != "front" {
			t.Errorf("event %d: from %s/%s, want van-1/front", i, ev.Vehicle, ev.Camera)
		}
		if w.sameID >= 0 {
			if ev.ID != seen[w.sameID].ID || ev.StartMS != seen[w.sameID].StartMS {
				t.Errorf("event %d: episode %s from %d, want %s from %d", i, ev.ID, ev.StartMS, seen[w.sameID].ID, seen[w.sameID].StartMS)
			}
		} else {
			for j := range i {
				if seen[j].ID == ev.ID {
					t.Errorf("event %d: episode %s reuses the id of event %d", i, ev.ID, j)
				}
			}
		}
		if (ev.Metrics == nil) != (w.fromReload || ev.Kind == alerts.KindCameraFault) {
			t.Errorf("event %d: metrics %+v (ended by reload: %v)", i, ev.Metrics, w.fromReload)
		}
		if ev.Kind == alerts.KindZone && ev.Metrics != nil && ev.Zone == "r0c0" {
			// r0c0 holds two pixels, both hot (new) or both cool (end).
			wantOOD := float32(1)
			if ev.Type == alerts.EventEnd {
				wantOOD = 0
			}
			if ev.Metrics.Pixels != 2 || ev.Metrics.OODFraction != wantOOD {
				t.Errorf("event %d: metrics %+v, want 2 pixels, ood %v", i, *ev.Metrics, wantOOD)
			}
		}
		if ev.Type == alerts.EventEnd && ev.Kind == alerts.KindZone && len(ev.Reasons) != 0 {
			t.Errorf("event %d: end with reasons %v", i, ev.Reasons)
		}
	}
}

// TestServiceFrameWithoutEventsAllocatesNothing: the steady-state frame
// path through an engine and the service (assessment, no event)
// allocates nothing.
func TestServiceFrameWithoutEventsAllocatesNothing(t *testing.T) {
	cfg := serviceConfig(t)
	calls := 0
	svc, err := Start(context.Background(), cfg.Topics(), cfg.ServiceConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(context.Background())
	spec, err := cfg.EngineSpec("")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := alerts.NewEngine(spec, alerts.Sinks{svc, alerts.SinkFuncs{OnEvent: func(*alerts.Event) error { calls++; return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !svc.Publisher().Connected() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the publisher's connect work allocates
	m := alerts.Maps{Width: 4, Height: 1, Epistemic: []float32{0.1, 0.1, 0.1, 0.1},
		Scale: []float32{0.1, 0.1, 0.1, 0.1}, Depth: []float32{50, 50, 50, 50}}
	f := alerts.Frame{Capture: time.Now()}
	// Other goroutines can only add to the process-wide count: the least
	// of three runs is the frame's.
	allocs := math.Inf(1)
	for range 3 {
		allocs = min(allocs, testing.AllocsPerRun(50, func() {
			f.Seq++
			if err := eng.Observe(f, m); err != nil {
				t.Fatal(err)
			}
		}))
	}
	if allocs != 0 || calls != 0 {
		t.Fatalf("%v allocations per frame, %d events; want 0 and 0", allocs, calls)
	}
}
