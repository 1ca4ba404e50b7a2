package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
)

// dev makes a received domain_shift event at ms after t0, delivered 40 ms
// later.
func dev(t0 time.Time, seq uint64, typ alerts.EventType, id string, startMS, ms int) Received {
	lvl := alerts.LevelWarn
	if typ == alerts.EventEnd {
		lvl = alerts.LevelOK
	}
	return Received{Event: alerts.Event{Seq: seq, ID: id, Type: typ, Kind: alerts.KindDomainShift, Level: lvl,
		StartMS: t0.UnixMilli() + int64(startMS), TimeMS: t0.UnixMilli() + int64(ms)},
		At: t0.Add(time.Duration(ms+40) * time.Millisecond)}
}

// TestAnalyzeDomainHandComputed: on the drive of TestAnalyzeHandComputed
// (fog 10-20 s, indoor 40-50 s), a domain_shift episode 1.2 s into the
// indoor segment that ends 0.8 s after the return, one in fog that starts
// 0.5 s in, a false one in clear driving, and zone events that must not
// count as domain episodes.
func TestAnalyzeDomainHandComputed(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	evs := []Received{
		ev(t0, 1, alerts.EventNew, "z1", "a", alerts.LevelWarn, alerts.LevelOK, 10100, 10100), // a zone episode
		dev(t0, 2, alerts.EventNew, "d1", 10500, 10500),
		dev(t0, 3, alerts.EventUpdate, "d1", 10500, 11500),
		dev(t0, 4, alerts.EventEnd, "d1", 10500, 20300),
		dev(t0, 5, alerts.EventNew, "d2", 30000, 30000), // false
		dev(t0, 6, alerts.EventEnd, "d2", 30000, 31000),
		dev(t0, 7, alerts.EventNew, "d3", 41200, 41200),
		dev(t0, 7, alerts.EventNew, "d3", 41200, 41200), // duplicate delivery
		dev(t0, 8, alerts.EventEnd, "d3", 41200, 50800),
	}
	eps := DomainEpisodes(evs)
	if len(eps) != 3 || eps[0].ID != "d1" || eps[0].Zone != DomainZone {
		t.Fatalf("domain episodes %+v", eps)
	}
	d := AnalyzeDomain(drive(t0), evs, 3*time.Second, t0.Add(70*time.Second))
	by := map[string]ZoneKind{}
	for _, zk := range d.PerZoneKind {
		by[zk.Kind] = zk
	}
	fog, in := by[KindFog], by[KindIndoor]
	if fog.Detected != 1 || fog.Decision[0] != 500*time.Millisecond || fog.Delivery[0] != 540*time.Millisecond {
		t.Errorf("fog: %+v", fog)
	}
	if in.Detected != 1 || in.Decision[0] != 1200*time.Millisecond || in.EndLatency[0] != 800*time.Millisecond {
		t.Errorf("indoor: %+v", in)
	}
	// clear time counted: 0-10 minus 3 s start-up, 20-40 minus 3 s, 50-70 minus 3 s = 7+17+17 s
	if len(d.False) != 1 || d.False[0].ID != "d2" || d.ClearTime != 41*time.Second {
		t.Errorf("false %+v over %v", d.False, d.ClearTime)
	}
	g := DomainGoals(d, nil)
	if len(g) != 2 || !g[0].Met || !strings.Contains(g[0].Name, KindIndoor) || !strings.Contains(g[0].Value, "1200 ms, 1 of 1") || g[1].Met {
		t.Errorf("goals %+v", g)
	}
	// the report shows the monitor beside the zones (zone a: its episode z1
	// never ends, so it covers both segments)
	zones := Analyze(drive(t0), []string{"a"}, Episodes(evs), 3*time.Second, t0.Add(70*time.Second))
	md := (&ScenarioReport{Analysis: zones, Domain: d, DomainGoals: g}).Markdown()
	for _, want := range []string{"## Domain monitor", "| fog | a | 1/1 | 500 / 500 ms | 540 / 540 ms |", "| indoor | a | 1/1 | 1200 / 1200 ms",
		"1 false domain_shift episodes"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestNewCameraSegment(t *testing.T) {
	p, err := OODPhase(KindNewCam, time.Second)
	if err != nil || p.Camera != "newcam" || p.World != "outdoor" || p.Corruption != "" {
		t.Fatalf("newcam phase %+v, %v", p, err)
	}
	if _, err := OODPhase("newcam:3", time.Second); err == nil {
		t.Error("newcam:3 accepted")
	}
}
