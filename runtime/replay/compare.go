package replay

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/didoedge/didoedge/alerts"
)

// CameraZone is the zone name under which camera faults are compared.
const CameraZone = "(camera)"

// Pair is a recorded event and the replayed event on the same frame; one
// of them is nil when the other side has no such event.
type Pair struct {
	Recorded, Replayed *alerts.Event
	// Diff says how they differ; "" when they match.
	Diff string
}

// ZoneResult compares one zone's events.
type ZoneResult struct {
	Zone string
	// Episodes are the episodes that opened (new events) on each side.
	RecordedEpisodes, ReplayedEpisodes int
	Pairs                              []Pair
	Mismatches                         int
}

// Result is a comparison of a recording's events with a replay's.
type Result struct {
	Zones []ZoneResult
	// Skipped are recorded events of episodes that opened before the
	// recording's first frame (rotation, event-mode clips): a replay of
	// this file cannot raise them.
	Skipped    []alerts.Event
	Mismatches int
}

// Match reports whether every comparable event matched.
func (r Result) Match() bool { return r.Mismatches == 0 }

func zoneOf(ev *alerts.Event) string {
	if ev.Kind == alerts.KindCameraFault {
		return CameraZone
	}
	return ev.Zone
}

// Compare pairs the recorded events of rec with the replayed events, zone
// by zone, by frame sequence number.
func Compare(rec *Recording, replayed []alerts.Event) Result {
	opened := map[string]bool{}
	for _, ev := range rec.Events {
		if ev.Type == alerts.EventNew {
			opened[ev.ID] = true
		}
	}
	var res Result
	byZone := map[string][2][]*alerts.Event{}
	for i := range rec.Events {
		ev := &rec.Events[i]
		if ev.Type != alerts.EventNew && !opened[ev.ID] {
			res.Skipped = append(res.Skipped, *ev)
			continue
		}
		z := byZone[zoneOf(ev)]
		z[0] = append(z[0], ev)
		byZone[zoneOf(ev)] = z
	}
	for i := range replayed {
		ev := &replayed[i]
		z := byZone[zoneOf(ev)]
		z[1] = append(z[1], ev)
		byZone[zoneOf(ev)] = z
	}
	names := make([]string, 0, len(byZone))
	for n := range byZone {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		zr := compareZone(n, byZone[n][0], byZone[n][1])
		res.Mismatches += zr.Mismatches
		res.Zones = append(res.Zones, zr)
	}
	return res
}

// compareZone merges two event lists ordered by frame.
func compareZone(zone string, a, b []*alerts.Event) ZoneResult {
	zr := ZoneResult{Zone: zone}
	for _, ev := range a {
		if ev.Type == alerts.EventNew {
			zr.RecordedEpisodes++
		}
	}
	for _, ev := range b {
		if ev.Type == alerts.EventNew {
			zr.ReplayedEpisodes++
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var p Pair
		switch {
		case i < len(a) && j < len(b) && a[i].FrameSeq == b[j].FrameSeq:
			p = Pair{Recorded: a[i], Replayed: b[j], Diff: diff(a[i], b[j])}
			i++
			j++
		case j >= len(b) || (i < len(a) && a[i].FrameSeq < b[j].FrameSeq):
			p = Pair{Recorded: a[i], Diff: "not raised by the replay"}
			i++
		default:
			p = Pair{Replayed: b[j], Diff: "raised only by the replay"}
			j++
		}
		if p.Diff != "" {
			zr.Mismatches++
		}
		zr.Pairs = append(zr.Pairs, p)
	}
	return zr
}

// diff lists the differences of two events on the same frame.
func diff(a, b *alerts.Event) string {
	var d []string
	add := func(what string, x, y any) {
		if x != y {
			d = append(d, fmt.Sprintf("%s %v, replayed %v", what, x, y))
		}
	}
	add("type", a.Type, b.Type)
	add("kind", a.Kind, b.Kind)
	add("level", a.Level, b.Level)
	add("previous level", a.Previous, b.Previous)
	add("start", msTime(a.StartMS), msTime(b.StartMS))
	add("id", a.ID, b.ID)
	if a.Type != alerts.EventEnd || b.Type != alerts.EventEnd {
		// An end may come at wall time (shutdown, reload): compared by frame.
		add("time", msTime(a.TimeMS), msTime(b.TimeMS))
	}
	return strings.Join(d, "; ")
}

func msTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("15:04:05.000")
}

// Write prints the comparison: per zone the episodes on each side and
// every event pair, then the verdict.
func (r Result) Write(w io.Writer) {
	for _, z := range r.Zones {
		fmt.Fprintf(w, "zone %s: episodes recorded %d, replayed %d; events %d, mismatches %d\n",
			z.Zone, z.RecordedEpisodes, z.ReplayedEpisodes, len(z.Pairs), z.Mismatches)
		for _, p := range z.Pairs {
			ev := p.Recorded
			if ev == nil {
				ev = p.Replayed
			}
			mark := "match   "
			if p.Diff != "" {
				mark = "MISMATCH"
			}
			fmt.Fprintf(w, "  %s frame %-7d %-6s %-8s (was %-8s) episode start %s UTC  %s", mark, ev.FrameSeq, ev.Type, ev.Level, ev.Previous,
				msTime(ev.StartMS), ev.ID)
			if p.Diff != "" {
				fmt.Fprintf(w, ": %s", p.Diff)
			}
			fmt.Fprintln(w)
		}
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(w, "%d recorded events belong to episodes that opened before the recording's first frame; not compared\n", len(r.Skipped))
	}
	n := 0
	for _, z := range r.Zones {
		n += len(z.Pairs)
	}
	if r.Match() {
		fmt.Fprintf(w, "replay matches the recording: %d events in %d zones\n", n, len(r.Zones))
	} else {
		fmt.Fprintf(w, "replay differs from the recording: %d mismatches among %d events\n", r.Mismatches, n)
	}
}
