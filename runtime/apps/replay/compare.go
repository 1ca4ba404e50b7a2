package replay

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/runtime/record"
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
	Skipped []alerts.Event
	// Notes say which events were set aside at the file's edges.
	Notes      []string
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

// RecordedEvents decodes the events of a recording (record.RecordedEvent:
// the published JSON) into alert events.
func RecordedEvents(rec *record.Recording) ([]alerts.Event, error) {
	evs := make([]alerts.Event, len(rec.Events))
	for i := range rec.Events {
		if err := rec.Events[i].Decode(&evs[i]); err != nil {
			return nil, fmt.Errorf("recording %s: %w", rec.Path, err)
		}
	}
	return evs, nil
}

// Compare pairs the recorded events of rec (RecordedEvents) with the replayed events, zone
// by zone, by frame sequence number.
//
// A file of a rotated recording starts and ends inside episodes: a
// replayed episode that opens on the file's first frame in a zone whose
// recorded episode opened before the file continues that episode (its
// events are compared without id and start); a replayed end on the file's
// last frame of an episode the file does not end is the end of the file,
// not of the episode. Both are noted, not counted as mismatches. Recorded
// events of an episode opened before the file that no replayed episode
// continues are Skipped.
func Compare(rec *record.Recording, recorded, replayed []alerts.Event) Result {
	opened, ended := map[string]bool{}, map[string]bool{}
	carried := map[string]string{} // zone -> recorded episode open at the file's first frame
	for i := range recorded {
		ev := &recorded[i]
		switch ev.Type {
		case alerts.EventNew:
			opened[ev.ID] = true
		case alerts.EventEnd:
			ended[ev.ID] = true
		}
	}
	for i := range recorded {
		if ev := &recorded[i]; !opened[ev.ID] {
			carried[zoneOf(ev)] = ev.ID
		}
	}
	continues := map[string]string{} // replayed episode -> the recorded one it continues
	for i := range replayed {
		ev := &replayed[i]
		if id, ok := carried[zoneOf(ev)]; ok && ev.Type == alerts.EventNew && uint32(ev.FrameSeq) == rec.FirstSeq {
			continues[ev.ID] = id
		}
	}
	continued := map[string]bool{}
	for _, id := range continues {
		continued[id] = true
	}
	var res Result
	byZone := map[string][2][]*alerts.Event{}
	add := func(side int, ev *alerts.Event) {
		z := byZone[zoneOf(ev)]
		z[side] = append(z[side], ev)
		byZone[zoneOf(ev)] = z
	}
	for i := range recorded {
		ev := &recorded[i]
		if !opened[ev.ID] && !continued[ev.ID] {
			res.Skipped = append(res.Skipped, *ev)
			continue
		}
		add(0, ev)
	}
	for i := range replayed {
		ev := &replayed[i]
		recID := ev.ID
		if id, ok := continues[ev.ID]; ok {
			recID = id
			if ev.Type == alerts.EventNew {
				res.Notes = append(res.Notes, fmt.Sprintf("zone %s: the replay's episode opened on the file's first frame %d continues recorded episode %s (opened before the file)",
					zoneOf(ev), ev.FrameSeq, id))
				continue
			}
		}
		if ev.Type == alerts.EventEnd && uint32(ev.FrameSeq) == rec.LastSeq && !ended[recID] {
			res.Notes = append(res.Notes, fmt.Sprintf("zone %s: episode %s is still open at the file's last frame %d (the recording goes on in the next file): the replay's end there is not compared",
				zoneOf(ev), recID, ev.FrameSeq))
			continue
		}
		add(1, ev)
	}
	names := make([]string, 0, len(byZone))
	for n := range byZone {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		zr := compareZone(n, byZone[n][0], byZone[n][1], continues)
		res.Mismatches += zr.Mismatches
		res.Zones = append(res.Zones, zr)
	}
	return res
}

// compareZone merges two event lists ordered by frame; continues maps
// replayed episodes to the recorded ones they continue.
func compareZone(zone string, a, b []*alerts.Event, continues map[string]string) ZoneResult {
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
			p = Pair{Recorded: a[i], Replayed: b[j], Diff: diff(a[i], b[j], continues[b[j].ID] == a[i].ID)}
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

// diff lists the differences of two events on the same frame; a replayed
// episode that continues a recorded one has its own id and start.
func diff(a, b *alerts.Event, continued bool) string {
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
	if !continued {
		add("start", msTime(a.StartMS), msTime(b.StartMS))
		add("id", a.ID, b.ID)
	}
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
	for _, n := range r.Notes {
		fmt.Fprintln(w, n)
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
