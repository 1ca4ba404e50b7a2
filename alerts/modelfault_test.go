package alerts

import (
	"testing"
	"time"
)

// fault feeds frame seq as one the models could not assess and returns
// the events it raised.
func (f *fixture) fault(t *testing.T, seq uint64, code string) []Event {
	t.Helper()
	capture := f.base.Add(time.Duration(seq) * 100 * time.Millisecond)
	f.clock.t = capture.Add(20 * time.Millisecond)
	n := len(f.rec.events)
	if err := f.e.ObserveFault(Frame{Seq: seq, Capture: capture}, code); err != nil {
		t.Fatal(err)
	}
	return f.rec.events[n:]
}

// TestModelFaultEpisode: frames the models cannot assess open one
// model_fault episode (critical, the fault code as its reason) and never a
// camera stall, though no frame is assessed for longer than the stall
// limit (2 s); the next assessed frame ends it; a reload ends an open one.
func TestModelFaultEpisode(t *testing.T) {
	f := newFixture(t, Timing{})
	f.frame(t, 0, 0)
	evs := f.fault(t, 1, FaultModelNonFinite)
	if len(evs) != 1 {
		t.Fatalf("first faulted frame: %+v, want one event", evs)
	}
	ev := evs[0]
	if ev.Kind != KindModelFault || ev.Type != EventNew || ev.Level != LevelCritical || ev.Fault != FaultModelNonFinite ||
		len(ev.Reasons) != 1 || ev.Reasons[0] != FaultModelNonFinite || ev.FrameSeq != 1 || !f.e.ModelFaulted() {
		t.Fatalf("event %+v", ev)
	}
	// 3 s of faulted frames (30 frames), ticking as the pipeline does.
	for seq := uint64(2); seq <= 31; seq++ {
		if evs := f.fault(t, seq, FaultModelNonFinite); len(evs) != 0 {
			t.Fatalf("frame %d raised %+v", seq, evs)
		}
		if err := f.e.Tick(f.clock.t); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.rec.events); n != 1 {
		t.Fatalf("3 s of faulted frames gave %d events (a camera stall?): %+v", n, f.rec.events)
	}
	evs = f.frame(t, 32, 0)
	if len(evs) != 1 || evs[0].Kind != KindModelFault || evs[0].Type != EventEnd || evs[0].ID != ev.ID ||
		evs[0].FrameSeq != 32 || evs[0].Level != LevelOK || evs[0].Previous != LevelCritical || f.e.ModelFaulted() {
		t.Fatalf("the assessed frame raised %+v, want the end of %s", evs, ev.ID)
	}
	// A new fault is a new episode; a reload ends it.
	evs = f.fault(t, 33, FaultModelRun)
	if len(evs) != 1 || evs[0].Fault != FaultModelRun || evs[0].ID == ev.ID {
		t.Fatalf("second fault: %+v", evs)
	}
	spec := EngineSpec{Config: f.e.Config(), Zones: f.e.Zones(), Calibration: f.e.Calibration()}
	r, err := f.e.PrepareReload(spec, f.clock.t)
	if err != nil {
		t.Fatal(err)
	}
	if err := ApplyReloads([]*PreparedReload{r}); err != nil {
		t.Fatal(err)
	}
	last := f.rec.events[len(f.rec.events)-1]
	if last.Kind != KindModelFault || last.Type != EventEnd || last.ID != evs[0].ID || f.e.ModelFaulted() {
		t.Fatalf("the reload did not end the model fault: last event %+v", last)
	}
	if err := f.e.ObserveFault(Frame{Seq: 40}, "bogus"); err == nil {
		t.Fatal("an unknown fault code was accepted")
	}
}
