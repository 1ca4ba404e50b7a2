package alerts

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCriterionHysteresis(t *testing.T) {
	frac := &Criterion{Warn: Hysteresis{0.3, 0.2}, Critical: Hysteresis{0.6, 0.5}}
	depth := &Criterion{Warn: Hysteresis{8, 10}, Critical: Hysteresis{4, 5}}
	tests := []struct {
		c      *Criterion
		higher bool
		v      float64
		cur    Level
		want   Level
	}{
		{frac, true, 0.1, LevelOK, LevelOK},
		{frac, true, 0.3, LevelOK, LevelWarn}, // enter is inclusive
		{frac, true, 0.25, LevelOK, LevelOK},  // inside the band: stays
		{frac, true, 0.25, LevelWarn, LevelWarn},
		{frac, true, 0.2, LevelWarn, LevelOK}, // exit is reached
		{frac, true, 0.55, LevelCritical, LevelCritical},
		{frac, true, 0.55, LevelWarn, LevelWarn},
		{frac, true, 0.45, LevelCritical, LevelWarn},
		{frac, true, 0.1, LevelCritical, LevelOK},
		{frac, true, 0.9, LevelOK, LevelCritical},
		{depth, false, 20, LevelOK, LevelOK},
		{depth, false, 8, LevelOK, LevelWarn},
		{depth, false, 9, LevelOK, LevelOK},
		{depth, false, 9, LevelWarn, LevelWarn},
		{depth, false, 4.5, LevelCritical, LevelCritical},
		{depth, false, 4.5, LevelWarn, LevelWarn},
		{depth, false, 3, LevelOK, LevelCritical},
		{depth, false, 10, LevelWarn, LevelOK},
	}
	for _, tc := range tests {
		if got := tc.c.step(tc.v, tc.cur, tc.higher); got != tc.want {
			t.Errorf("step(%v, cur %v, higherWorse %v) = %v, want %v", tc.v, tc.cur, tc.higher, got, tc.want)
		}
	}
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// recorder is a Sink that keeps copies of what it is given.
type recorder struct {
	events []Event
	states []State
	stats  []Stats
	snaps  []Snapshot
	zones  [][]string
	// failEvents makes Event fail (an outbox that is full).
	failEvents bool
}

func (r *recorder) Event(ev *Event) error {
	r.events = append(r.events, *ev)
	if r.failEvents {
		return fmt.Errorf("recorder: refused %s", ev.ID)
	}
	return nil
}
func (r *recorder) State(st *State) error { r.states = append(r.states, *st); return nil }
func (r *recorder) Stats(st *Stats) error { r.stats = append(r.stats, *st); return nil }
func (r *recorder) Snapshot(s *Snapshot) error {
	c, ev := *s, *s.Event // the event lives in the engine's scratch space
	c.Event = &ev
	r.snaps = append(r.snaps, c)
	return nil
}
func (r *recorder) Zones(_, _ string, z []string) error {
	r.zones = append(r.zones, slices.Clone(z))
	return nil
}

// fixture: a 10x1 map, one zone "all" over it, only the OOD criterion
// (warn 0.3/0.2, critical 0.6/0.5); frames every 100 ms of capture time,
// observed 20 ms later; tenths of the pixels have K/S 0.9 > tau_e 0.5.
type fixture struct {
	e     *Engine
	rec   *recorder
	clock *fakeClock
	base  time.Time
	m     Maps
	img   Image
}

func newFixture(t *testing.T, tm Timing) *fixture {
	t.Helper()
	cal := DefaultCalibration()
	cal.TauE = 0.5
	cal.Levels = LevelThresholds{OODFraction: &Criterion{Warn: Hysteresis{0.3, 0.2}, Critical: Hysteresis{0.6, 0.5}}}
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	zones := []Zone{{Name: "all", Polygon: [][2]float64{{0, 0}, {1, 0}, {1, 1}, {0, 1}}}}
	rec := &recorder{}
	e, err := NewEngine(EngineSpec{Config: EngineConfig{Vehicle: "van-1", Camera: "front", Timing: tm,
		StallAfter: 2 * time.Second, Now: clock.now}, Zones: zones, Calibration: cal}, rec)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{e: e, rec: rec, clock: clock, base: clock.t,
		m:   Maps{Width: 10, Height: 1, Epistemic: make([]float32, 10), Scale: make([]float32, 10), Depth: make([]float32, 10)},
		img: Image{Width: 10, Height: 1, RGB: make([]uint8, 30)}}
}

// frame feeds frame seq with tenths/10 of the pixels out of distribution
// and returns the events it raised.
func (f *fixture) frame(t *testing.T, seq uint64, tenths int) []Event {
	t.Helper()
	for i := range f.m.Epistemic {
		f.m.Epistemic[i], f.m.Depth[i], f.m.Scale[i] = 0.1, 50, 0.1
		if i < tenths {
			f.m.Epistemic[i] = 0.9
		}
	}
	capture := f.base.Add(time.Duration(seq) * 100 * time.Millisecond)
	f.clock.t = capture.Add(20 * time.Millisecond)
	n := len(f.rec.events)
	if err := f.e.Observe(Frame{Seq: seq, Capture: capture, Camera: f.e.Config().Camera, Image: &f.img}, f.m); err != nil {
		t.Fatal(err)
	}
	return f.rec.events[n:]
}

// TestEpisodeStateMachine feeds hand-made sequences (one frame per 100 ms,
// the zone's OOD fraction in tenths) and compares the events with
// sequences computed by hand from the rules of Timing.
func TestEpisodeStateMachine(t *testing.T) {
	ms := time.Millisecond
	type ev struct {
		frame   int
		typ     EventType
		level   Level
		prev    Level
		episode int // 1 for the first episode id, 2 for the second
	}
	C, W, O := LevelCritical, LevelWarn, LevelOK
	rep := func(v, n int) []int { return slices.Repeat([]int{v}, n) }
	cat := func(parts ...[]int) []int { return slices.Concat(parts...) }
	for _, tc := range []struct {
		name string
		tm   Timing
		ood  []int
		want []ev
	}{
		{
			// Flicker 0.7 / 0 every frame: each dip lasts 100 ms < exit
			// inertia 150 ms, so the level never drops. After f5 the input
			// stays 0: lowered at f7 (200 ms >= 150 ms), end 500 ms later.
			name: "flickering input gives one episode",
			tm:   Timing{ExitInertia: 150 * ms, MergeWindow: 500 * ms},
			ood:  cat([]int{7, 0, 7, 0, 7}, rep(0, 12)),
			want: []ev{{0, EventNew, C, O, 1}, {12, EventEnd, O, C, 1}},
		},
		{
			// Lowered at f6 (exit inertia 100 ms after f5), back at f9:
			// 300 ms < merge window 600 ms, so the same episode goes on
			// with an update from ok. Lowered again at f13, end at f19.
			name: "short dip inside the merge window keeps the id",
			tm:   Timing{ExitInertia: 100 * ms, MergeWindow: 600 * ms},
			ood:  cat(rep(7, 5), rep(0, 4), rep(7, 3), rep(0, 9)),
			want: []ev{{0, EventNew, C, O, 1}, {9, EventUpdate, C, O, 1}, {19, EventEnd, O, C, 1}},
		},
		{
			// Lowered at f4, the merge window (300 ms) runs out at f7: the
			// end goes out and the return at f9 is a new episode.
			name: "a dip longer than the merge window ends the episode",
			tm:   Timing{ExitInertia: 100 * ms, MergeWindow: 300 * ms},
			ood:  cat(rep(7, 3), rep(0, 6), rep(7, 2)),
			want: []ev{{0, EventNew, C, O, 1}, {7, EventEnd, O, C, 1}, {9, EventNew, C, O, 2}},
		},
		{
			// Below exit from f3; 500 ms of exit inertia end it at f8 (no
			// merge window: the end is immediate).
			name: "a real end after the exit inertia",
			tm:   Timing{ExitInertia: 500 * ms},
			ood:  cat(rep(7, 3), rep(0, 8)),
			want: []ev{{0, EventNew, C, O, 1}, {8, EventEnd, O, C, 1}},
		},
		{
			// One hot frame; the episode is held until 500 ms after its start.
			name: "minimum episode length",
			tm:   Timing{MinEpisode: 500 * ms},
			ood:  cat([]int{7}, rep(0, 7)),
			want: []ev{{0, EventNew, C, O, 1}, {5, EventEnd, O, C, 1}},
		},
		{
			// 200 ms of entry inertia: f0-f1 are too short (the run breaks
			// at f2); the run f3..f5 reaches 200 ms at f5.
			name: "entry inertia",
			tm:   Timing{EnterInertia: 200 * ms, CriticalEnterInertia: 200 * ms},
			ood:  []int{7, 7, 0, 7, 7, 7},
			want: []ev{{5, EventNew, C, O, 1}},
		},
		{
			// Warn waits 300 ms (f0..f3), critical enters at once: 0.4 from
			// f0 opens warn at f3; 0.7 at f4 raises critical at once; the
			// spike to 0.7 at f9 after ok frames opens critical at once.
			name: "weak evidence waits, strong evidence enters at once",
			tm:   Timing{EnterInertia: 300 * ms},
			ood:  []int{4, 4, 4, 4, 7, 0, 0, 0, 0, 7},
			want: []ev{{3, EventNew, W, O, 1}, {4, EventUpdate, C, W, 1}, {5, EventEnd, O, C, 1}, {9, EventNew, C, O, 2}},
		},
		{
			// 0.4 enters warn; 0.7 critical (an update); 0.6 stays
			// critical; 0.3 is below critical's exit 0.5 and at warn's
			// entry: warn; 0.1 is below warn's exit 0.2: the end.
			name: "level changes inside an episode",
			tm:   Timing{},
			ood:  []int{4, 7, 6, 3, 1},
			want: []ev{{0, EventNew, W, O, 1}, {1, EventUpdate, C, W, 1}, {3, EventUpdate, W, C, 1}, {4, EventEnd, O, W, 1}},
		},
		{
			// Fusion with tau 100 ms at 100 ms per frame: a = 1 - e^-1 =
			// 0.632. f1: y = 0.632 >= 0.6 critical; f2: y = 0.632 e^-1 =
			// 0.233, below critical's exit 0.5 and above warn's exit 0.2:
			// warn; f3: y = 0.086: ok, the end.
			name: "fusion smooths a one-frame spike by hand",
			tm:   Timing{FusionTimeConstant: 100 * ms},
			ood:  []int{0, 10, 0, 0},
			want: []ev{{1, EventNew, C, O, 1}, {2, EventUpdate, W, C, 1}, {3, EventEnd, O, W, 1}},
		},
		{
			// tau 300 ms: a = 1 - e^(-1/3) = 0.2835; 0.7 then 0 forever:
			// y = 0.198, 0.142, ... never reaches warn 0.3: no episode.
			name: "fusion ignores a short spike",
			tm:   Timing{FusionTimeConstant: 300 * ms},
			ood:  cat([]int{0, 7}, rep(0, 5)),
			want: nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.tm)
			ids := map[string]int{}
			var got []ev
			for i, o := range tc.ood {
				for _, e := range f.frame(t, uint64(i), o) {
					if _, ok := ids[e.ID]; !ok {
						ids[e.ID] = len(ids) + 1
					}
					got = append(got, ev{i, e.Type, e.Level, e.Previous, ids[e.ID]})
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("events\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestFusionIsFrameRateIndependent: the EMA of a constant input x after
// time T is x (1 - exp(-T/tau)) whatever the frame spacing, since the
// factors (1 - a_i) = exp(-dt_i/tau) multiply to exp(-T/tau).
func TestFusionIsFrameRateIndependent(t *testing.T) {
	tau := 500 * time.Millisecond
	want := 0.8 * (1 - math.Exp(-4)) // 2 s = 4 tau
	for _, fps := range []int{5, 10, 15, 30, 60} {
		var f ema
		f.add(0, 0, tau)
		var y float64
		dt := time.Second / time.Duration(fps)
		for range 2 * fps {
			y = f.add(0.8, dt, tau)
		}
		if math.Abs(y-want) > 1e-8 {
			t.Errorf("%d fps: y(2 s) = %.12f, want %.12f", fps, y, want)
		}
	}
}

func TestEngineEventsCarryMetricsAndState(t *testing.T) {
	f := newFixture(t, Timing{ExitInertia: 100 * time.Millisecond, MinEpisode: time.Second})
	base := int64(1_700_000_000_000)
	if len(f.rec.zones) != 1 || !slices.Equal(f.rec.zones[0], []string{"all"}) || len(f.rec.states) != 1 || f.rec.states[0].Level != LevelOK {
		t.Fatalf("start: zones %v states %+v", f.rec.zones, f.rec.states)
	}
	evs := f.frame(t, 0, 4)
	if len(evs) != 1 {
		t.Fatalf("events %+v", evs)
	}
	ev := evs[0]
	if ev.ID != fmt.Sprintf("front-all-%d-1", base) || ev.Metrics == nil || ev.Metrics.OODFraction != 0.4 ||
		ev.Metrics.Fused == nil || ev.Metrics.Fused.OODFraction != 0.4 || !slices.Equal(ev.Reasons, []string{"ood_fraction"}) ||
		ev.Vehicle != "van-1" || ev.Zone != "all" || ev.StartMS != base || ev.TimeMS != base {
		t.Fatalf("new event %+v metrics %+v", ev, ev.Metrics)
	}
	st := f.rec.states[len(f.rec.states)-1]
	if st.Level != LevelWarn || st.EpisodeID != ev.ID || st.SinceMS != base {
		t.Fatalf("state %+v", st)
	}
	// The snapshot of the new event came before the event, of its frame.
	if len(f.rec.snaps) != 1 || f.rec.snaps[0].Event.Snapshot == nil || f.rec.snaps[0].Event.Snapshot.TimeMS != ev.TimeMS ||
		ev.Snapshot == nil || ev.Snapshot.FrameSeq != 0 {
		t.Fatalf("snapshot %+v event snapshot %+v", f.rec.snaps, ev.Snapshot)
	}
	// Critical: a higher level is a peak, with a snapshot; the same level
	// again (after a drop to warn) at a lower severity is not.
	f.frame(t, 1, 9)
	f.frame(t, 2, 3)
	f.frame(t, 3, 3)
	f.frame(t, 4, 7)
	if len(f.rec.snaps) != 2 || f.rec.snaps[1].Event.FrameSeq != 1 {
		for _, s := range f.rec.snaps {
			t.Logf("snapshot of frame %d %s %s", s.Event.FrameSeq, s.Event.Type, s.Event.Level)
		}
		t.Fatalf("%d snapshots, want the new event's and the first critical's", len(f.rec.snaps))
	}
	st2 := f.e.ZoneStatus(0)
	if st2.Level != LevelCritical || st2.Episode != ev.ID || st2.Fused.OODFraction != 0.7 {
		t.Fatalf("zone status %+v", st2)
	}
	// Frames 0..4 then 15: 10 dropped; 6 frames; latency 20 ms each.
	f.frame(t, 15, 7)
	s := f.e.Stats(f.clock.t)
	if s.Frames != 6 || s.DroppedFrames != 10 || s.LatencyMeanMS != 20 || s.LatencyMaxMS != 20 {
		t.Fatalf("stats %+v", s)
	}
}

func TestEngineCameraStall(t *testing.T) {
	f := newFixture(t, Timing{})
	f.frame(t, 0, 0)
	last := f.clock.t
	if err := f.e.Tick(last.Add(1999 * time.Millisecond)); err != nil || len(f.rec.events) != 0 {
		t.Fatalf("stall raised early: %+v %v", f.rec.events, err)
	}
	f.e.Tick(last.Add(2 * time.Second))
	evs := f.rec.events
	if len(evs) != 1 || evs[0].Kind != KindCameraFault || evs[0].Type != EventNew || evs[0].Level != LevelCritical || evs[0].Fault != FaultCameraStalled {
		t.Fatalf("stall events %+v", evs)
	}
	id := evs[0].ID
	if want := fmt.Sprintf("front-camera-%d-1", last.Add(2*time.Second).UnixMilli()); id != want {
		t.Fatalf("id %q, want %q", id, want)
	}
	f.e.Tick(last.Add(5 * time.Second))
	if len(f.rec.events) != 1 {
		t.Fatalf("stall raised twice: %+v", f.rec.events)
	}
	if s := f.e.Stats(f.clock.t); !s.CameraStalled {
		t.Fatal("stats do not show the stall")
	}
	evs = f.frame(t, 60, 0)
	if len(evs) != 1 || evs[0].Type != EventEnd || evs[0].ID != id || evs[0].Level != LevelOK || evs[0].Previous != LevelCritical {
		t.Fatalf("resume events %+v", evs)
	}
}

// TestEngineReloadAndClose: a reload ends open episodes (also one waiting
// out its merge window) and a camera fault, announces the new zones and
// their states; a refused spec changes nothing; Close ends what is open.
func TestEngineReloadAndClose(t *testing.T) {
	f := newFixture(t, Timing{MergeWindow: time.Hour})
	f.frame(t, 0, 7)
	f.frame(t, 1, 0) // back at ok: the episode waits out the merge window
	id := f.rec.events[0].ID
	if st := f.e.ZoneStatus(0); st.Level != LevelOK || !st.Closing || st.Episode != id {
		t.Fatalf("status %+v", st)
	}
	f.e.Tick(f.clock.t.Add(time.Minute)) // a stall
	bad := EngineSpec{Config: f.e.Config(), Zones: nil, Calibration: f.e.Calibration()}
	if err := f.e.Reload(bad, f.clock.t); err == nil || !strings.Contains(err.Error(), "no zones") {
		t.Fatalf("reload without zones: %v", err)
	}
	if len(f.rec.events) != 2 || len(f.rec.zones) != 1 {
		t.Fatalf("refused reload delivered %+v", f.rec.events[2:])
	}
	two := []Zone{{Name: "left", Polygon: [][2]float64{{0, 0}, {0.5, 0}, {0.5, 1}, {0, 1}}},
		{Name: "right", Polygon: [][2]float64{{0.5, 0}, {1, 0}, {1, 1}, {0.5, 1}}}}
	now := f.clock.t.Add(time.Minute)
	nstates := len(f.rec.states)
	if err := f.e.Reload(EngineSpec{Config: f.e.Config(), Zones: two, Calibration: f.e.Calibration()}, now); err != nil {
		t.Fatal(err)
	}
	evs := f.rec.events[2:]
	if len(evs) != 2 || evs[0].ID != id || evs[0].Type != EventEnd || evs[0].Previous != LevelCritical || len(evs[0].Reasons) != 0 ||
		evs[1].Kind != KindCameraFault || evs[1].Type != EventEnd {
		t.Fatalf("reload events %+v", evs)
	}
	states := f.rec.states[nstates:]
	if len(states) != 3 || states[0].Zone != "all" || states[0].Level != LevelOK || states[0].EpisodeID != "" ||
		states[1].Zone != "left" || states[2].Zone != "right" {
		t.Fatalf("reload states %+v", states)
	}
	if len(f.rec.zones) != 2 || !slices.Equal(f.rec.zones[1], []string{"left", "right"}) {
		t.Fatalf("zones announced %v", f.rec.zones)
	}
	evs = f.frame(t, 2, 7) // pixels 0-6: left all hot, right 2 of 5
	if len(evs) != 2 || evs[0].Zone != "left" || evs[0].ID != fmt.Sprintf("front-left-%d-3", f.base.Add(200*time.Millisecond).UnixMilli()) ||
		evs[1].Zone != "right" || evs[1].Level != LevelWarn {
		t.Fatalf("after reload %+v", evs)
	}
	n := len(f.rec.events)
	if err := f.e.Close(f.clock.t); err != nil {
		t.Fatal(err)
	}
	if evs := f.rec.events[n:]; len(evs) != 2 || evs[0].Type != EventEnd || evs[1].Type != EventEnd {
		t.Fatalf("close events %+v", evs)
	}
}

// TestEngineSinkErrorsDoNotStopEvents: a sink that refuses events (a full
// outbox) gets every event anyway and the error is returned.
func TestEngineSinkErrorsDoNotStopEvents(t *testing.T) {
	f := newFixture(t, Timing{})
	f.rec.failEvents = true
	err := f.e.Observe(Frame{Seq: 1, Capture: f.base}, Maps{Width: 10, Height: 1,
		Epistemic: slices.Repeat([]float32{0.9}, 10), Scale: make([]float32, 10), Depth: slices.Repeat([]float32{5}, 10)})
	if err == nil || !strings.Contains(err.Error(), "refused") || len(f.rec.events) != 1 || f.e.ZoneStatus(0).Level != LevelCritical {
		t.Fatalf("err %v events %+v", err, f.rec.events)
	}
}

func TestEngineRejectsOtherCamera(t *testing.T) {
	f := newFixture(t, Timing{})
	m := Maps{Width: 1, Height: 1, Epistemic: []float32{0}, Scale: []float32{0}, Depth: []float32{1}}
	if err := f.e.Observe(Frame{Camera: "rear"}, m); err == nil {
		t.Fatal("frame of another camera accepted")
	}
}

func TestEngineObserveWithoutEventsDoesNotAllocate(t *testing.T) {
	f := newFixture(t, Timing{FusionTimeConstant: 200 * time.Millisecond})
	f.frame(t, 0, 0)
	seq := uint64(1)
	if n := testing.AllocsPerRun(20, func() { f.frame(t, seq, 0); seq++ }); n != 0 {
		t.Fatalf("Observe allocates %v times per frame", n)
	}
}

// TestObserveRisksReplaysObserve: recording LastRisks of a live engine
// and replaying them through ObserveRisks on a second engine gives the
// same events (without snapshots).
func TestObserveRisksReplaysObserve(t *testing.T) {
	tm := Timing{FusionTimeConstant: 150 * time.Millisecond, ExitInertia: 200 * time.Millisecond, MergeWindow: 300 * time.Millisecond}
	live, replay := newFixture(t, tm), newFixture(t, tm)
	for i, o := range []int{0, 8, 9, 2, 9, 0, 0, 0, 0, 0, 0, 0, 6, 6, 0, 0, 0, 0, 0, 0} {
		live.frame(t, uint64(i), o)
		risks := slices.Clone(live.e.LastRisks())
		if err := replay.e.ObserveRisks(Frame{Seq: uint64(i), Capture: live.base.Add(time.Duration(i) * 100 * time.Millisecond)}, risks); err != nil {
			t.Fatal(err)
		}
	}
	if len(live.rec.events) < 4 || len(live.rec.events) != len(replay.rec.events) {
		t.Fatalf("live %d events, replay %d", len(live.rec.events), len(replay.rec.events))
	}
	for i := range live.rec.events {
		a, b := live.rec.events[i], replay.rec.events[i]
		a.Snapshot, b.Snapshot = nil, nil
		if a.ID != b.ID || a.Type != b.Type || a.Level != b.Level || a.TimeMS != b.TimeMS || a.Metrics.Fused.OODFraction != b.Metrics.Fused.OODFraction {
			t.Fatalf("event %d: live %+v, replay %+v", i, a, b)
		}
	}
	if err := replay.e.ObserveRisks(Frame{}, nil); err == nil {
		t.Fatal("metrics of no zone accepted")
	}
}

// TestMergeWindowHysteresisBand: within the merge window a return into
// the hysteresis band (above warn's exit 0.2, below its entry 0.3) is
// enough to continue the episode (no entry inertia here, so at once);
// after the window passes the same value opens nothing. A 20-pixel zone, one frame per 100 ms, exit
// inertia 100 ms, merge window 300 ms, no fusion: 0.7 (f0-f2), 0.1 (f3:
// below exit; f4: lowered, the window opens), 0.25 at f5 (in the band:
// the episode continues as warn), 0.1 from f6 (lowered at f7, end at
// f10), 0.25 at f12 (after the window: nothing).
func TestMergeWindowHysteresisBand(t *testing.T) {
	cal := DefaultCalibration()
	cal.TauE = 0.5
	cal.Levels = LevelThresholds{OODFraction: &Criterion{Warn: Hysteresis{0.3, 0.2}, Critical: Hysteresis{0.6, 0.5}}}
	rec := &recorder{}
	zones := []Zone{{Name: "all", Polygon: [][2]float64{{0, 0}, {1, 0}, {1, 1}, {0, 1}}}}
	e, err := NewEngine(EngineSpec{Config: EngineConfig{Vehicle: "v", Camera: "front",
		Timing: Timing{ExitInertia: 100 * time.Millisecond, MergeWindow: 300 * time.Millisecond}}, Zones: zones, Calibration: cal}, rec)
	if err != nil {
		t.Fatal(err)
	}
	m := Maps{Width: 20, Height: 1, Epistemic: make([]float32, 20), Scale: make([]float32, 20), Depth: slices.Repeat([]float32{30}, 20)}
	base := time.Unix(1_700_000_000, 0)
	type ev struct {
		frame       int
		typ         EventType
		level, prev Level
	}
	var got []ev
	for i, hot := range []int{14, 14, 14, 2, 2, 5, 2, 2, 2, 2, 2, 2, 5, 5, 2} {
		for p := range m.Epistemic {
			m.Epistemic[p] = 0.1
			if p < hot {
				m.Epistemic[p] = 0.9
			}
		}
		n := len(rec.events)
		if err := e.Observe(Frame{Seq: uint64(i), Capture: base.Add(time.Duration(i) * 100 * time.Millisecond)}, m); err != nil {
			t.Fatal(err)
		}
		for _, x := range rec.events[n:] {
			got = append(got, ev{i, x.Type, x.Level, x.Previous})
			if x.ID != rec.events[0].ID {
				t.Errorf("frame %d: episode %s, want %s", i, x.ID, rec.events[0].ID)
			}
		}
	}
	want := []ev{{0, EventNew, LevelCritical, LevelOK}, {5, EventUpdate, LevelWarn, LevelOK}, {10, EventEnd, LevelOK, LevelWarn}}
	if !slices.Equal(got, want) {
		t.Fatalf("events\n got %+v\nwant %+v", got, want)
	}
}

// namedFailing is a sink whose events fail.
type namedFailing struct{ recorder }

func (*namedFailing) SinkName() string        { return "failing-outbox" }
func (*namedFailing) Event(*Event) error      { return errors.New("disk full") }
func (s *namedFailing) State(st *State) error { return s.recorder.State(st) }

// An engine error from a sink names that sink (the runtime logs it by
// name, issue 29), whether the engine was given the sink alone or in a
// list; a working sink in the same list still gets the event.
func TestSinkErrorsNameTheSink(t *testing.T) {
	for _, list := range []bool{false, true} {
		f := newFixture(t, Timing{})
		var sink Sink = &namedFailing{}
		ok := &recorder{}
		if list {
			sink = Sinks{ok, sink}
		}
		e, err := NewEngine(EngineSpec{Config: EngineConfig{Vehicle: "van-1", Camera: "front", Now: f.clock.now},
			Zones: []Zone{{Name: "all", Polygon: [][2]float64{{0, 0}, {1, 0}, {1, 1}, {0, 1}}}}, Calibration: f.e.cal}, sink)
		if err != nil {
			t.Fatal(err)
		}
		for i := range f.m.Epistemic {
			f.m.Epistemic[i], f.m.Depth[i], f.m.Scale[i] = 0.9, 50, 0.1
		}
		err = e.Observe(Frame{Seq: 1, Capture: f.base}, f.m)
		var se *SinkError
		if !errors.As(err, &se) || se.Sink != "failing-outbox" || !strings.HasPrefix(se.Op, "new event front-all-") ||
			!strings.Contains(err.Error(), "sink failing-outbox: new event") || !strings.Contains(err.Error(), "disk full") {
			t.Fatalf("list %v: error %v; want a SinkError naming failing-outbox and the new event", list, err)
		}
		if list && len(ok.events) != 1 {
			t.Fatalf("the working sink got %d events, want 1", len(ok.events))
		}
	}
}
