package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/didoedge/didoedge/alerts"
)

// DomainZone is the pseudo-zone name under which camera-level domain_shift
// episodes go through Analyze: one "zone" that covers the whole camera.
const DomainZone = "domain_shift"

// GoalDomainFirst bounds the time from a sustained change of the frames to
// the first domain_shift event (issue 39: within 2 s at 15 fps).
const GoalDomainFirst = 2 * time.Second

// DomainEpisodes groups the domain_shift events by episode id (duplicates
// by seq dropped), in order of their start, as Episodes of the pseudo-zone
// DomainZone.
func DomainEpisodes(evs []Received) []Episode {
	byID := map[string]*Episode{}
	var order []string
	seen := map[uint64]bool{}
	for _, r := range evs {
		ev := r.Event
		if ev.Kind != alerts.KindDomainShift || (ev.Seq != 0 && seen[ev.Seq]) {
			continue
		}
		seen[ev.Seq] = true
		ep, ok := byID[ev.ID]
		if !ok {
			ep = &Episode{ID: ev.ID, Zone: DomainZone, Start: time.UnixMilli(ev.StartMS)}
			byID[ev.ID] = ep
			order = append(order, ev.ID)
		}
		switch ev.Type {
		case alerts.EventNew:
			ep.Start, ep.StartReceived = time.UnixMilli(ev.TimeMS), r.At
		case alerts.EventEnd:
			ep.End, ep.EndReceived = time.UnixMilli(ev.TimeMS), r.At
		}
		ep.MaxLevel = max(ep.MaxLevel, ev.Level)
	}
	out := make([]Episode, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	slices.SortStableFunc(out, func(a, b Episode) int { return a.Start.Compare(b.Start) })
	return out
}

// AnalyzeDomain attributes the domain_shift episodes to the drive's
// segments exactly as Analyze does zone episodes: per OOD kind the
// segments detected and the time to the first domain_shift event, and the
// false episodes per hour of clear driving.
func AnalyzeDomain(spans []Span, evs []Received, grace time.Duration, runEnd time.Time) *Analysis {
	return Analyze(spans, []string{DomainZone}, DomainEpisodes(evs), grace, runEnd)
}

// DomainGoals are issue 39's targets for the monitor: the first
// domain_shift event within GoalDomainFirst of every segment of the kinds
// the zones cannot see (indoor, the new camera, and sensor noise, when no
// zone is affected by it), and no false domain_shift episode in 10 min of
// clear driving.
func DomainGoals(d, zones *Analysis) []Goal {
	ms := func(t time.Duration) string { return fmt.Sprintf("%.0f ms", float64(t)/float64(time.Millisecond)) }
	var g []Goal
	for _, zk := range d.PerZoneKind {
		must := zk.Kind == KindIndoor || zk.Kind == KindNewCam
		if strings.HasPrefix(zk.Kind, KindNoise) && zones != nil && !kindAffected(zones, zk.Kind) {
			must = true
		}
		if !must {
			continue
		}
		worst := Quantile(zk.Decision, 1)
		g = append(g, Goal{Name: "first domain_shift event, " + zk.Kind + " (max over segments)", Target: "<= " + ms(GoalDomainFirst) + " in every segment",
			Value: fmt.Sprintf("%s, %d of %d segments", ms(worst), zk.Detected, zk.Segments),
			Met:   zk.Segments > 0 && zk.Detected == zk.Segments && worst <= GoalDomainFirst})
	}
	g = append(g, Goal{Name: "false domain_shift episodes in clear driving", Target: "0 in 10 min",
		Value: fmt.Sprintf("%d in %.1f min (%.1f per hour)", len(d.False), d.ClearTime.Minutes(), d.FalsePerHour()),
		Met:   len(d.False) == 0 && d.ClearTime >= 10*time.Minute})
	return g
}

// kindAffected reports whether some zone is affected by kind.
func kindAffected(a *Analysis, kind string) bool {
	for _, zk := range a.PerZoneKind {
		if zk.Kind == kind && zk.Affected {
			return true
		}
	}
	return false
}

// domainTable renders the monitor's figures per OOD kind beside the
// zones': segments with a domain_shift episode, the time to the first
// event, the end after the return, coverage.
func domainTable(d, zones *Analysis) string {
	var b strings.Builder
	b.WriteString("| kind | zones affected | domain_shift detected | first event p50 / max (frame) | first event p50 / max (subscriber) | episodes per segment | end p50 / max | coverage |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	ms := func(t time.Duration) string { return fmt.Sprintf("%.0f", float64(t)/float64(time.Millisecond)) }
	for _, zk := range d.PerZoneKind {
		var aff []string
		if zones != nil {
			for _, z := range zones.PerZoneKind {
				if z.Kind == zk.Kind && z.Affected {
					aff = append(aff, z.Zone)
				}
			}
		}
		if len(aff) == 0 {
			aff = []string{"none"}
		}
		eps := make([]string, len(zk.EpisodesPerSegment))
		for i, n := range zk.EpisodesPerSegment {
			eps[i] = fmt.Sprint(n)
		}
		fmt.Fprintf(&b, "| %s | %s | %d/%d | %s / %s ms | %s / %s ms | %s | %s / %s ms | %.3f |\n", zk.Kind, strings.Join(aff, ", "),
			zk.Detected, zk.Segments, ms(Quantile(zk.Decision, 0.5)), ms(Quantile(zk.Decision, 1)),
			ms(Quantile(zk.Delivery, 0.5)), ms(Quantile(zk.Delivery, 1)), strings.Join(eps, " "),
			ms(Quantile(zk.EndLatency, 0.5)), ms(Quantile(zk.EndLatency, 1)), zk.Coverage())
	}
	return b.String()
}
