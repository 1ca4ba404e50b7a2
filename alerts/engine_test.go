package alerts

import (
	"fmt"
	"slices"
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

// engineFixture: a 10x1 map, one zone over all of it, only the OOD
// criterion; ood tenths per frame set how many pixels exceed tau_e.
func engineFixture(t *testing.T) (*Engine, *fakeClock, func(seq uint64, tenths int) []Event) {
	cal := DefaultCalibration()
	cal.TauE = 0.5
	cal.Levels = LevelThresholds{OODFraction: &Criterion{Warn: Hysteresis{0.3, 0.2}, Critical: Hysteresis{0.6, 0.5}}}
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	zones := []Zone{{Name: "all", Polygon: [][2]float64{{0, 0}, {1, 0}, {1, 1}, {0, 1}}}}
	e, err := NewEngine(EngineConfig{Vehicle: "van-1", Camera: "front", InertiaFrames: 2, MinHold: time.Second,
		StallAfter: 2 * time.Second, Now: clock.now}, zones, nil, cal)
	if err != nil {
		t.Fatal(err)
	}
	base := clock.t
	m := Maps{Width: 10, Height: 1, Epistemic: make([]float32, 10), Scale: make([]float32, 10), Depth: make([]float32, 10)}
	frame := func(seq uint64, tenths int) []Event {
		for i := range m.Epistemic {
			m.Epistemic[i], m.Depth[i], m.Scale[i] = 0.1, 50, 0.1
			if i < tenths {
				m.Epistemic[i] = 0.9
			}
		}
		capture := base.Add(time.Duration(seq) * 100 * time.Millisecond)
		clock.t = capture.Add(20 * time.Millisecond)
		evs, err := e.Observe(Frame{Seq: seq, Capture: capture, Camera: "front"}, m, nil)
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	return e, clock, frame
}

func TestEngineEpisodes(t *testing.T) {
	e, clock, frame := engineFixture(t)
	base := int64(1_700_000_000_000)
	ood := []int{0, 4, 1, 4, 2, 7, 7, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 4}
	type got struct {
		frame int
		typ   EventType
		level Level
		prev  Level
		id    string
	}
	var all []got
	for i, o := range ood {
		for _, ev := range frame(uint64(i), o) {
			all = append(all, got{i, ev.Type, ev.Level, ev.Previous, ev.ID})
			if ev.Metrics == nil || ev.Metrics.OODFraction != float32(o)/10 || ev.Zone != "all" || ev.Vehicle != "van-1" {
				t.Errorf("frame %d: event %+v metrics %+v", i, ev, ev.Metrics)
			}
			wantReasons := []string{"ood_fraction"}
			if ev.Type == EventEnd {
				wantReasons = []string{}
			}
			if !slices.Equal(ev.Reasons, wantReasons) {
				t.Errorf("frame %d: reasons %v, want %v", i, ev.Reasons, wantReasons)
			}
		}
	}
	id1 := fmt.Sprintf("front-all-%d-1", base+400)
	id2 := fmt.Sprintf("front-all-%d-2", base+1800)
	want := []got{
		// f1 alone does not raise (inertia 2); f2 drops back; f3+f4 raise warn
		// (f4's 0.2 is inside the warn band so the criterion stays warn).
		{4, EventNew, LevelWarn, LevelOK, id1},
		{6, EventUpdate, LevelCritical, LevelWarn, id1},
		// ok from f7, but critical was entered at f6 (600 ms) and is held 1 s.
		{16, EventEnd, LevelOK, LevelCritical, id1},
		{18, EventNew, LevelWarn, LevelOK, id2},
	}
	if !slices.Equal(all, want) {
		t.Fatalf("events\n got %+v\nwant %+v", all, want)
	}
	st := e.States(clock.t)
	if len(st) != 1 || st[0].Level != LevelWarn || st[0].EpisodeID != id2 || st[0].SinceMS != base+1800 {
		t.Fatalf("state %+v", st)
	}
	// Frames 0..18 then 25: 6 dropped; 20 frames; latency 20 ms each.
	frame(25, 4)
	s := e.Stats(clock.t)
	if s.Frames != 20 || s.DroppedFrames != 6 || s.LatencyMeanMS != 20 || s.LatencyMaxMS != 20 {
		t.Fatalf("stats %+v", s)
	}
}

func TestEngineCameraStall(t *testing.T) {
	e, clock, frame := engineFixture(t)
	frame(0, 0)
	last := clock.t
	if evs := e.Tick(last.Add(1999*time.Millisecond), nil); len(evs) != 0 {
		t.Fatalf("stall raised early: %+v", evs)
	}
	evs := e.Tick(last.Add(2*time.Second), nil)
	if len(evs) != 1 || evs[0].Kind != KindCameraFault || evs[0].Type != EventNew || evs[0].Level != LevelCritical || evs[0].Fault != FaultCameraStalled {
		t.Fatalf("stall events %+v", evs)
	}
	id := evs[0].ID
	if want := fmt.Sprintf("front-camera-%d-1", last.Add(2*time.Second).UnixMilli()); id != want {
		t.Fatalf("id %q, want %q", id, want)
	}
	if evs := e.Tick(last.Add(5*time.Second), nil); len(evs) != 0 {
		t.Fatalf("stall raised twice: %+v", evs)
	}
	if s := e.Stats(clock.t); !s.CameraStalled {
		t.Fatal("stats do not show the stall")
	}
	evs = frame(60, 0)
	if len(evs) != 1 || evs[0].Type != EventEnd || evs[0].ID != id || evs[0].Level != LevelOK || evs[0].Previous != LevelCritical {
		t.Fatalf("resume events %+v", evs)
	}
}

func TestEngineRejectsOtherCamera(t *testing.T) {
	e, _, _ := engineFixture(t)
	m := Maps{Width: 1, Height: 1, Epistemic: []float32{0}, Scale: []float32{0}, Depth: []float32{1}}
	if _, err := e.Observe(Frame{Camera: "rear"}, m, nil); err == nil {
		t.Fatal("frame of another camera accepted")
	}
}

func TestEngineObserveWithoutEventsDoesNotAllocate(t *testing.T) {
	_, _, frame := engineFixture(t)
	frame(0, 0)
	seq := uint64(1)
	if n := testing.AllocsPerRun(20, func() { frame(seq, 0); seq++ }); n != 0 {
		t.Fatalf("Observe allocates %v times per frame", n)
	}
}
