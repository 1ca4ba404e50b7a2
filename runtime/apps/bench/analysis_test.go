package bench

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
)

// drive: clear 0-10 s, fog 10-20 s, clear 20-40 s, indoor 40-50 s,
// clear 50-70 s (seconds after t0).
func drive(t0 time.Time) []Span {
	s := func(kind string, a, b int) Span {
		return Span{Kind: kind, Start: t0.Add(time.Duration(a) * time.Second), End: t0.Add(time.Duration(b) * time.Second)}
	}
	return []Span{s(KindClear, 0, 10), s(KindFog, 10, 20), s(KindClear, 20, 40), s(KindIndoor, 40, 50), s(KindClear, 50, 70)}
}

// ev makes a received zone event at ms after t0, delivered 50 ms later.
func ev(t0 time.Time, seq uint64, typ alerts.EventType, id, zone string, level, prev alerts.Level, startMS, ms int) Received {
	return Received{Event: alerts.Event{Seq: seq, ID: id, Type: typ, Kind: alerts.KindZone, Zone: zone, Level: level, Previous: prev,
		StartMS: t0.UnixMilli() + int64(startMS), TimeMS: t0.UnixMilli() + int64(ms)},
		At: t0.Add(time.Duration(ms+50) * time.Millisecond)}
}

// TestAnalyzeHandComputed: a fog segment seen by zone a with one episode
// (80 ms after the start, end 1.5 s after the return) and by zone b with
// a flap (a second episode 1 s after the return, within the grace); an
// indoor segment seen by a only, 200 ms late, ending 3 s after the
// return; a false episode in clear driving; a duplicate event (same seq)
// that must not count.
func TestAnalyzeHandComputed(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	C, W, O := alerts.LevelCritical, alerts.LevelWarn, alerts.LevelOK
	evs := []Received{
		ev(t0, 1, alerts.EventNew, "a1", "a", C, O, 10080, 10080),
		ev(t0, 2, alerts.EventNew, "b1", "b", W, O, 10200, 10200),
		ev(t0, 2, alerts.EventNew, "b1", "b", W, O, 10200, 10200), // QoS 1 duplicate
		ev(t0, 3, alerts.EventEnd, "b1", "b", O, W, 10200, 15000),
		ev(t0, 4, alerts.EventUpdate, "a1", "a", C, O, 10080, 16000), // back within the merge window
		ev(t0, 5, alerts.EventEnd, "a1", "a", O, C, 10080, 21500),
		ev(t0, 6, alerts.EventNew, "b2", "b", W, O, 21000, 21000), // 1 s after the return: a flap of fog
		ev(t0, 7, alerts.EventEnd, "b2", "b", O, W, 21000, 22000),
		ev(t0, 8, alerts.EventNew, "a2", "a", C, O, 30000, 30000), // false: clear, long after fog
		ev(t0, 9, alerts.EventEnd, "a2", "a", O, C, 30000, 31000),
		ev(t0, 10, alerts.EventNew, "a3", "a", C, O, 40200, 40200),
		ev(t0, 11, alerts.EventEnd, "a3", "a", O, C, 40200, 53000),
	}
	eps := Episodes(evs)
	if len(eps) != 5 || eps[0].ID != "a1" || eps[0].Reopened != 1 || eps[0].MaxLevel != C {
		t.Fatalf("episodes %+v", eps)
	}
	a := Analyze(drive(t0), []string{"a", "b"}, eps, 3*time.Second, t0.Add(70*time.Second))
	get := func(kind, zone string) ZoneKind {
		for _, z := range a.PerZoneKind {
			if z.Kind == kind && z.Zone == zone {
				return z
			}
		}
		t.Fatalf("no %s/%s", kind, zone)
		return ZoneKind{}
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	fa, fb, ia, ib := get(KindFog, "a"), get(KindFog, "b"), get(KindIndoor, "a"), get(KindIndoor, "b")
	if !fa.Affected || fa.Flaps != 0 || !slices.Equal(fa.EpisodesPerSegment, []int{1}) || !slices.Equal(fa.Decision, []time.Duration{ms(80)}) ||
		!slices.Equal(fa.Delivery, []time.Duration{ms(130)}) || !slices.Equal(fa.EndLatency, []time.Duration{ms(1500)}) || math.Abs(fa.Coverage()-0.992) > 1e-9 {
		t.Errorf("fog a: %+v coverage %v", fa, fa.Coverage())
	}
	// b: two episodes (one a flap), 10.2-15 s covered: 4.8 of 10 s.
	if fb.Flaps != 1 || !slices.Equal(fb.EpisodesPerSegment, []int{2}) || math.Abs(fb.Coverage()-0.48) > 1e-9 || !slices.Equal(fb.EndLatency, []time.Duration{ms(2000)}) {
		t.Errorf("fog b: %+v coverage %v", fb, fb.Coverage())
	}
	if !ia.Affected || !slices.Equal(ia.Decision, []time.Duration{ms(200)}) || !slices.Equal(ia.EndLatency, []time.Duration{ms(3000)}) || math.Abs(ia.Coverage()-0.98) > 1e-9 {
		t.Errorf("indoor a: %+v coverage %v", ia, ia.Coverage())
	}
	if ib.Affected || ib.Detected != 0 || ib.Coverage() != 0 {
		t.Errorf("indoor b: %+v", ib)
	}
	// Clear time: (10-3 start-up) + (20-3) + (20-3) = 41 s; one false episode.
	if a.ClearTime != 41*time.Second || len(a.False) != 1 || a.False[0].ID != "a2" {
		t.Errorf("clear %v false %+v", a.ClearTime, a.False)
	}
	p := a.Pool()
	if p.Flaps != 1 || p.Missed != 0 || len(p.Decision) != 3 || Quantile(p.Decision, 0.95) != ms(200) || Quantile(p.EndLatency, 1) != ms(3000) {
		t.Errorf("pooled %+v", p)
	}
	goals := Goals(a)
	met := map[string]bool{}
	for _, g := range goals {
		met[g.Name] = g.Met
	}
	if !met["detection p95 (deciding frame - segment start)"] || met["episodes per OOD segment per affected zone"] ||
		met["false episodes in clear driving"] || met["end after the return, max (end frame - return)"] {
		t.Errorf("goals %+v", goals)
	}
	var buf bytes.Buffer
	path := filepath.Join(t.TempDir(), "timeline.png")
	if err := Timeline(path, a, eps); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	buf.Write(b)
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() < 1000 {
		t.Fatalf("timeline %v", img.Bounds())
	}
}

func TestScriptAndKinds(t *testing.T) {
	s, err := Script([]string{KindFog, "noise:5", KindIndoor}, 2, 5*time.Second, 3*time.Second, 4*time.Second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// lead, then 2 x (3 kinds + gap): 13 segments; the tail extends the last gap.
	if len(s) != 13 || s[0].Kind != KindClear || s[1].Kind != KindFog || s[3].Kind != "noise:5" || s[3].Phase.Severity != 5 ||
		s[12].Phase.Duration != 64*time.Second || s[5].Phase.World != "indoor" {
		t.Fatalf("script %+v", s)
	}
	for _, bad := range []string{"rain", "fog:3", "noise:x", "noise:9"} {
		if _, err := Script([]string{bad}, 1, time.Second, time.Second, time.Second, 0); err == nil {
			t.Errorf("kind %q accepted", bad)
		}
	}
}

// TestReanalyzeRebuildsTheReport writes a run's recordings by hand (the
// drive and events of TestAnalyzeHandComputed) and rebuilds the report
// from them: the same analysis comes out.
func TestReanalyzeRebuildsTheReport(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	dir := t.TempDir()
	spans := drive(t0)
	rep := jsonReport{Timing: map[string]string{"fusion_time_constant": "50ms", "enter_inertia": "300ms", "critical_enter_inertia": "0s",
		"exit_inertia": "200ms", "min_episode": "1s", "merge_window": "1s"}, Frames: 3, FPS: 15}
	for _, s := range spans {
		rep.Segments = append(rep.Segments, jsonSpan{s.Kind, s.Start.UnixMilli(), s.End.UnixMilli()})
	}
	rep.Zones = []jsonZoneKind{{Kind: KindFog, Zone: "a"}, {Kind: KindFog, Zone: "b"}}
	b, _ := json.Marshal(rep)
	os.WriteFile(filepath.Join(dir, "report.json"), b, 0o644)
	var msgs bytes.Buffer
	evs := []Received{
		ev(t0, 1, alerts.EventNew, "a1", "a", alerts.LevelCritical, alerts.LevelOK, 10080, 10080),
		ev(t0, 2, alerts.EventEnd, "a1", "a", alerts.LevelOK, alerts.LevelCritical, 10080, 21500),
		ev(t0, 3, alerts.EventNew, "a2", "a", alerts.LevelWarn, alerts.LevelOK, 30000, 30000),
		ev(t0, 4, alerts.EventEnd, "a2", "a", alerts.LevelOK, alerts.LevelWarn, 30000, 31000),
	}
	for _, r := range evs {
		p, _ := json.Marshal(r.Event)
		line, _ := json.Marshal(map[string]any{"at_ms": r.At.UnixMilli(), "topic": "didoedge/v/front/events", "payload": json.RawMessage(p)})
		msgs.Write(append(line, '\n'))
	}
	msgs.WriteString(`{"at_ms":1700000000000,"topic":"didoedge/v/front/a/snapshot","bytes":3,"sha256":"00"}` + "\n")
	os.WriteFile(filepath.Join(dir, "messages.jsonl"), msgs.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "frames.jsonl"), []byte(`{"seq":1,"capture_ms":1700000011000,"ood_fraction":[0.9,0.1],"aleatoric_fraction":[0.2,0]}`+"\n"), 0o644)
	r, err := Reanalyze(dir, 3*time.Second, 0.15)
	if err != nil {
		t.Fatal(err)
	}
	if r.Timing.EnterInertia != 300*time.Millisecond || len(r.Analysis.False) != 1 || r.Analysis.False[0].ID != "a2" {
		t.Fatalf("timing %v false %+v", r.Timing, r.Analysis.False)
	}
	var fog ZoneKind
	for _, z := range r.Analysis.PerZoneKind {
		if z.Kind == KindFog && z.Zone == "a" {
			fog = z
		}
	}
	if !slices.Equal(fog.Decision, []time.Duration{80 * time.Millisecond}) || !slices.Equal(fog.EndLatency, []time.Duration{1500 * time.Millisecond}) {
		t.Fatalf("fog a %+v", fog)
	}
	var sig Signal
	for _, s := range r.Signals {
		if s.Kind == KindFog && s.Zone == "a" {
			sig = s
		}
	}
	if sig.Frames != 1 || sig.OODMean < 0.89 || sig.AleaWarn != 1 {
		t.Fatalf("signal %+v", sig)
	}
	for _, f := range []string{"report.md", "report.json", "timeline.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
}
