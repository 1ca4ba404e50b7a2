package alerts

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// batchQueue is a durable sink shared by several engines, as the MQTT
// outbox is: it numbers events, and takes batches all or nothing.
type batchQueue struct {
	seq     uint64
	events  []Event
	batches int
	full    bool // every batch is refused (an outbox that is full)
}

func (q *batchQueue) Event(ev *Event) error {
	q.seq++
	ev.Seq = q.seq
	q.events = append(q.events, *ev)
	return nil
}

func (q *batchQueue) State(*State) error { return nil }

func (q *batchQueue) EventBatch(evs []*Event) error {
	if q.full {
		return errors.New("outbox full")
	}
	q.batches++
	for _, ev := range evs {
		if err := q.Event(ev); err != nil {
			return err
		}
	}
	return nil
}

// TestApplyReloadsAllOrNothing: three cameras over one durable sink, each
// with an open episode. A reload whose end events the sink refuses
// changes no camera: zones, episodes, delivered events and announced
// zones stay as they were. The same prepared reloads applied when the
// sink has room end the three episodes in one batch (consecutive seqs),
// every other sink sees each end event with its seq, and every camera
// runs its new zones. A reload prepared before a frame changed the engine
// is refused.
func TestApplyReloadsAllOrNothing(t *testing.T) {
	q := &batchQueue{}
	names := []string{"front", "left", "right"}
	var fs []*fixture
	for _, name := range names {
		f := newFixture(t, Timing{})
		rec := &recorder{}
		e, err := NewEngine(EngineSpec{Config: EngineConfig{Vehicle: "van-1", Camera: name, Now: f.clock.now},
			Zones: f.e.Zones(), Calibration: f.e.Calibration()}, Sinks{q, rec})
		if err != nil {
			t.Fatal(err)
		}
		f.e, f.rec = e, rec
		fs = append(fs, f)
		if evs := f.frame(t, 1, 7); len(evs) != 1 || evs[0].Type != EventNew {
			t.Fatalf("%s: events %+v", name, evs)
		}
	}
	two := []Zone{{Name: "left", Polygon: [][2]float64{{0, 0}, {0.5, 0}, {0.5, 1}, {0, 1}}},
		{Name: "right", Polygon: [][2]float64{{0.5, 0}, {1, 0}, {1, 1}, {0.5, 1}}}}
	prepare := func(wantEnds int) []*PreparedReload {
		var rs []*PreparedReload
		for _, f := range fs {
			r, err := f.e.PrepareReload(EngineSpec{Config: f.e.Config(), Zones: two, Calibration: f.e.Calibration()}, f.clock.t)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.EndEvents()) != wantEnds {
				t.Fatalf("%s: %d end events prepared, want %d", f.e.Config().Camera, len(r.EndEvents()), wantEnds)
			}
			rs = append(rs, r)
		}
		return rs
	}
	type snapshot struct {
		zones    int
		episode  string
		level    Level
		events   int
		states   int
		announce int
	}
	snap := func() []snapshot {
		var out []snapshot
		for _, f := range fs {
			st := f.e.ZoneStatus(0)
			out = append(out, snapshot{len(f.e.Zones()), st.Episode, st.Level, len(f.rec.events), len(f.rec.states), len(f.rec.zones)})
		}
		return out
	}
	rs := prepare(1)
	before, queued := snap(), len(q.events)
	q.full = true
	err := ApplyReloads(rs)
	if err == nil || !strings.Contains(err.Error(), "outbox full") || !strings.Contains(err.Error(), "3 end events") {
		t.Fatalf("reload into a full outbox: %v", err)
	}
	if after := snap(); !slices.Equal(after, before) || len(q.events) != queued {
		t.Fatalf("a refused reload changed something:\nbefore %+v\nafter  %+v\nqueued %d -> %d", before, after, queued, len(q.events))
	}
	for i, f := range fs {
		if before[i].episode == "" || before[i].level != LevelCritical || f.e.Zones()[0].Name != "all" {
			t.Fatalf("%s: before the reload episode %q level %v", names[i], before[i].episode, before[i].level)
		}
	}

	q.full = false
	if err := ApplyReloads(rs); err != nil {
		t.Fatal(err)
	}
	ends := q.events[queued:]
	if q.batches != 1 || len(ends) != 3 {
		t.Fatalf("%d batches, %d events queued by the reload; want 1 batch of 3", q.batches, len(ends))
	}
	for i, f := range fs {
		ev := ends[i]
		if ev.Type != EventEnd || ev.ID != before[i].episode || ev.Camera != names[i] || ev.Seq != ends[0].Seq+uint64(i) {
			t.Fatalf("end event %d: %+v", i, ev)
		}
		hook := f.rec.events[before[i].events:]
		if len(hook) != 1 || hook[0].Seq != ev.Seq || hook[0].ID != ev.ID {
			t.Fatalf("%s: the other sink saw %+v, want the end event with seq %d", names[i], hook, ev.Seq)
		}
		if got := f.e.Zones(); len(got) != 2 || got[0].Name != "left" || len(f.rec.zones) != before[i].announce+1 {
			t.Fatalf("%s: zones after reload %v, announced %v", names[i], got, f.rec.zones)
		}
		// The old zone's retained state goes back to ok.
		states := f.rec.states[before[i].states:]
		if states[0].Zone != "all" || states[0].Level != LevelOK || states[0].EpisodeID != "" {
			t.Fatalf("%s: first state after the reload %+v", names[i], states[0])
		}
	}
	// A prepared reload is refused once the engine has moved on.
	rs = prepare(0)
	fs[1].frame(t, 3, 0)
	n := len(q.events)
	if err := ApplyReloads(rs); err == nil || !strings.Contains(err.Error(), `"left"`) || !strings.Contains(err.Error(), "changed") {
		t.Fatalf("stale reload: %v", err)
	}
	if len(q.events) != n {
		t.Fatal("a stale reload queued events")
	}
}

// removedLog records CameraRemoved calls beside the recorder's events
// and states.
type removedLog struct {
	recorder
	removed []string // "camera:zone,zone"
}

func (r *removedLog) CameraRemoved(_, camera string, zones []string) error {
	r.removed = append(r.removed, camera+":"+strings.Join(zones, ","))
	return nil
}

// TestPrepareRemoveAllOrNothing: two cameras over one durable sink, each
// with an open episode; camera "left" is removed while "front" reloads,
// in one ApplyReloads. A sink that refuses the batch leaves both as they
// were (no CameraRemoved). Applied: both end events go in one batch on
// consecutive seqs, the removed camera's other sink sees its end event,
// its zone's closing state (ok), then CameraRemoved with its zones; the
// retired engine's Close delivers nothing more, and a second removal of
// it is refused.
func TestPrepareRemoveAllOrNothing(t *testing.T) {
	q := &batchQueue{}
	var fs []*fixture
	var logs []*removedLog
	for _, name := range []string{"front", "left"} {
		f := newFixture(t, Timing{})
		rl := &removedLog{}
		e, err := NewEngine(EngineSpec{Config: EngineConfig{Vehicle: "van-1", Camera: name, Now: f.clock.now},
			Zones: f.e.Zones(), Calibration: f.e.Calibration()}, Sinks{q, rl})
		if err != nil {
			t.Fatal(err)
		}
		f.e, f.rec = e, &rl.recorder
		fs, logs = append(fs, f), append(logs, rl)
		if evs := f.frame(t, 1, 7); len(evs) != 1 || evs[0].Type != EventNew {
			t.Fatalf("%s: events %+v", name, evs)
		}
	}
	front, left := fs[0], fs[1]
	reload, err := front.e.PrepareReload(EngineSpec{Config: front.e.Config(), Zones: front.e.Zones(), Calibration: front.e.Calibration()}, front.clock.t)
	if err != nil {
		t.Fatal(err)
	}
	remove := left.e.PrepareRemove(left.clock.t)
	if !remove.Removes() || reload.Removes() || len(remove.EndEvents()) != 1 {
		t.Fatalf("prepared removal: removes %v, reload removes %v, %d end events", remove.Removes(), reload.Removes(), len(remove.EndEvents()))
	}
	episode := left.e.ZoneStatus(0).Episode
	queued, seen := len(q.events), len(logs[1].events)
	q.full = true
	if err := ApplyReloads([]*PreparedReload{reload, remove}); !errors.Is(err, ErrNotApplied) {
		t.Fatalf("removal into a full sink: %v", err)
	}
	if len(q.events) != queued || len(logs[1].removed) != 0 || left.e.ZoneStatus(0).Episode != episode {
		t.Fatalf("a refused removal changed something: queued %d -> %d, removed %v", queued, len(q.events), logs[1].removed)
	}
	q.full = false
	states := len(logs[1].states)
	if err := ApplyReloads([]*PreparedReload{reload, remove}); err != nil {
		t.Fatal(err)
	}
	ends := q.events[queued:]
	if q.batches != 1 || len(ends) != 2 || ends[1].Camera != "left" || ends[1].ID != episode || ends[1].Seq != ends[0].Seq+1 {
		t.Fatalf("end events of the batch: %+v", ends)
	}
	if got := logs[1].events[seen:]; len(got) != 1 || got[0].Type != EventEnd || got[0].Seq != ends[1].Seq {
		t.Fatalf("the removed camera's other sink saw %+v", got)
	}
	if st := logs[1].states[states:]; len(st) != 1 || st[0].Zone != "all" || st[0].Level != LevelOK || st[0].EpisodeID != "" {
		t.Fatalf("closing states of the removed camera: %+v", st)
	}
	if !slices.Equal(logs[1].removed, []string{"left:all"}) || len(logs[0].removed) != 0 {
		t.Fatalf("CameraRemoved calls: front %v, left %v", logs[0].removed, logs[1].removed)
	}
	n := len(q.events)
	if err := left.e.Close(left.clock.t); err != nil || len(q.events) != n {
		t.Fatalf("Close of a removed engine: err %v, %d events delivered", err, len(q.events)-n)
	}
	if err := ApplyReloads([]*PreparedReload{left.e.PrepareRemove(left.clock.t)}); !errors.Is(err, ErrNotApplied) {
		t.Fatalf("second removal: %v", err)
	}
}
