package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Goal targets of the scenario benchmark (issue 18).
const (
	GoalDetection = 200 * time.Millisecond
	GoalEnd       = 2 * time.Second
	GoalCoverage  = 0.95
)

// Goals evaluates the targets on the affected (zone, kind) pairs: p95
// detection latency (at the deciding frame and at the subscriber), one
// episode per segment (no flap, no miss), no false episode in clear
// driving, the end after the return, and coverage.
func Goals(a *Analysis) []Goal {
	p := a.Pool()
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
	var g []Goal
	for _, x := range []struct {
		name string
		v    []time.Duration
	}{{"detection p95 (deciding frame - segment start)", p.Decision}, {"detection p95 (subscriber - segment start)", p.Delivery}} {
		q := Quantile(x.v, 0.95)
		g = append(g, Goal{Name: x.name, Target: "<= " + ms(GoalDetection), Value: ms(q), Met: len(x.v) > 0 && q <= GoalDetection})
	}
	g = append(g, Goal{Name: "episodes per OOD segment per affected zone", Target: "exactly 1 (0 flaps, 0 misses)",
		Value: fmt.Sprintf("%d flaps, %d missed segments (all zones: %d flaps)", p.Flaps, p.Missed, a.AllFlaps()),
		Met:   p.Flaps == 0 && p.Missed == 0 && len(p.Decision) > 0})
	g = append(g, Goal{Name: "false episodes in clear driving", Target: "0 in 10 min",
		Value: fmt.Sprintf("%d in %.1f min (%.1f per hour)", len(a.False), a.ClearTime.Minutes(), a.FalsePerHour()),
		Met:   len(a.False) == 0 && a.ClearTime >= 10*time.Minute})
	for _, x := range []struct {
		name string
		v    []time.Duration
	}{{"end after the return, max (end frame - return)", p.EndLatency}, {"end after the return, max (subscriber - return)", p.EndDelivery}} {
		m := Quantile(x.v, 1)
		g = append(g, Goal{Name: x.name, Target: "<= " + ms(GoalEnd), Value: fmt.Sprintf("%s (p95 %s)", ms(m), ms(Quantile(x.v, 0.95))),
			Met: len(x.v) > 0 && m <= GoalEnd})
	}
	cov := 0.0
	if p.Total > 0 {
		cov = p.Covered.Seconds() / p.Total.Seconds()
	}
	g = append(g, Goal{Name: "coverage of OOD time by an open episode", Target: fmt.Sprintf(">= %.2f", GoalCoverage),
		Value: fmt.Sprintf("%.3f", cov), Met: cov >= GoalCoverage})
	return g
}

// Markdown renders the report.
func (r *ScenarioReport) Markdown() string {
	var b strings.Builder
	a := r.Analysis
	fmt.Fprintf(&b, "# didoedge bench scenario\n\n")
	fmt.Fprintf(&b, "Timing: %s.\n\n", r.Timing)
	fmt.Fprintf(&b, "Drive: %v, %d segments; %d frames assessed (%.2f fps), %d dropped (latest-frame policy); %d MQTT messages recorded.\n\n",
		r.Duration.Round(time.Second), len(a.Spans), r.Frames, r.FPS, r.Dropped, r.Messages)
	b.WriteString("## Goals\n\n| goal | target | measured | met |\n|---|---|---|---|\n")
	for _, g := range r.Goals {
		met := "no"
		if g.Met {
			met = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.Name, g.Target, g.Value, met)
	}
	b.WriteString("\nAffected: a zone that had an open episode in at least half of the segments of a kind; goals pool the affected pairs.\n\n")
	b.WriteString("### Per kind\n\nThe same goals per segment kind, over its affected zones (detection and end judged at the subscriber).\n\n")
	b.WriteString(kindTable(a))
	b.WriteString("\n### Per zone and kind\n\n")
	b.WriteString(zoneKindTable(a))
	fmt.Fprintf(&b, "\n## Clear driving\n\n%.1f min counted (segments after %v of start-up and %v after each OOD segment); %d false episodes (%.2f per hour).\n",
		a.ClearTime.Minutes(), a.Grace, a.Grace, len(a.False), a.FalsePerHour())
	for _, ep := range a.False {
		fmt.Fprintf(&b, "- %s %s from %s to %s (max %s)\n", ep.Zone, ep.ID, ep.Start.Format("15:04:05.000"), endText(ep), ep.MaxLevel)
	}
	if d := r.Domain; d != nil {
		b.WriteString("\n## Domain monitor (camera-level domain_shift episodes)\n\n")
		b.WriteString("The same segments, attributed like zone episodes: the time from a segment's start to the first domain_shift new event, at the deciding frame and at the subscriber.\n\n")
		b.WriteString("| goal | target | measured | met |\n|---|---|---|---|\n")
		for _, g := range r.DomainGoals {
			met := "no"
			if g.Met {
				met = "yes"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.Name, g.Target, g.Value, met)
		}
		b.WriteString("\n")
		b.WriteString(domainTable(d, a))
		fmt.Fprintf(&b, "\n%.1f min of clear driving counted; %d false domain_shift episodes (%.2f per hour).\n", d.ClearTime.Minutes(), len(d.False), d.FalsePerHour())
		for _, ep := range d.False {
			fmt.Fprintf(&b, "- %s from %s to %s\n", ep.ID, ep.Start.Format("15:04:05.000"), endText(ep))
		}
	}
	if len(r.Signals) > 0 {
		b.WriteString("\n## Raw zone signals per segment kind\n\n")
		b.WriteString("Per frame, before fusion (the first 500 ms of each segment left out). alea >= warn: frames whose aleatoric_fraction reaches the aleatoric criterion's warn entry; alea events: events of the zone naming aleatoric_fraction among their reasons.\n\n")
		b.WriteString("| kind | zone | frames | ood mean / p95 | alea mean / p95 | alea >= warn | alea events |\n|---|---|---|---|---|---|---|\n")
		for _, s := range r.Signals {
			fmt.Fprintf(&b, "| %s | %s | %d | %.3f / %.3f | %.3f / %.3f | %.3f | %d |\n", s.Kind, s.Zone, s.Frames, s.OODMean, s.OODP95,
				s.AleaMean, s.AleaP95, s.AleaWarn, s.AleaEvents)
		}
	}
	if len(r.Tuning) > 0 {
		b.WriteString("\n## Timings replayed over the recorded zone metrics\n\n")
		b.WriteString("The frames' recorded zone metrics run through a fresh engine per timing (frame times only: no delivery latency). ")
		b.WriteString("Best 12 of the grid by goals met, then flaps + false episodes, then end latency; all in tuning.md.\n\n")
		b.WriteString(tuningTable(rankTuning(r.Tuning)[:min(12, len(r.Tuning))]))
	}
	return b.String()
}

func endText(ep Episode) string {
	if ep.End.IsZero() {
		return "(open)"
	}
	return ep.End.Format("15:04:05.000")
}

func zoneKindTable(a *Analysis) string {
	var b strings.Builder
	b.WriteString("| kind | zone | affected | detected | decision p50 / p95 | subscriber p50 / p95 | episodes per segment | flaps | end p50 / max | coverage |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	zk := append([]ZoneKind(nil), a.PerZoneKind...)
	sortZoneKinds(zk)
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond)) }
	for _, z := range zk {
		aff := "no"
		if z.Affected {
			aff = "yes"
		}
		eps := make([]string, len(z.EpisodesPerSegment))
		for i, n := range z.EpisodesPerSegment {
			eps[i] = fmt.Sprint(n)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d/%d | %s / %s ms | %s / %s ms | %s | %d | %s / %s ms | %.3f |\n",
			z.Kind, z.Zone, aff, z.Detected, z.Segments, ms(Quantile(z.Decision, 0.5)), ms(Quantile(z.Decision, 0.95)),
			ms(Quantile(z.Delivery, 0.5)), ms(Quantile(z.Delivery, 0.95)), strings.Join(eps, " "), z.Flaps,
			ms(Quantile(z.EndLatency, 0.5)), ms(Quantile(z.EndLatency, 1)), z.Coverage())
	}
	return b.String()
}

// jsonReport is report.json.
type jsonReport struct {
	Timing   map[string]string `json:"timing"`
	Frames   uint64            `json:"frames"`
	FPS      float64           `json:"fps"`
	Dropped  uint64            `json:"dropped"`
	Messages int               `json:"messages"`
	Goals    []Goal            `json:"goals"`
	Segments []jsonSpan        `json:"segments"`
	Zones    []jsonZoneKind    `json:"zones"`
	False    []string          `json:"false_episodes"`
	ClearMin float64           `json:"clear_minutes"`
	// Domain: the domain monitor's episodes per kind (zone "domain_shift"),
	// its goals and false episodes.
	Domain      []jsonZoneKind `json:"domain_shift,omitempty"`
	DomainGoals []Goal         `json:"domain_goals,omitempty"`
	DomainFalse []string       `json:"domain_false_episodes,omitempty"`
}

type jsonSpan struct {
	Kind    string `json:"kind"`
	StartMS int64  `json:"start_ms"`
	EndMS   int64  `json:"end_ms"`
}

type jsonZoneKind struct {
	Kind, Zone         string
	Affected           bool
	Detected, Segments int
	DecisionMS         []int64
	DeliveryMS         []int64
	EpisodesPerSegment []int
	Flaps              int
	EndMS              []int64
	Coverage           float64
}

func msList(v []time.Duration) []int64 {
	out := make([]int64, len(v))
	for i, d := range v {
		out[i] = d.Milliseconds()
	}
	return out
}

func (r *ScenarioReport) write(dir string, events []Received) error {
	a := r.Analysis
	j := jsonReport{Timing: map[string]string{
		"fusion_time_constant": r.Timing.FusionTimeConstant.String(), "enter_inertia": r.Timing.EnterInertia.String(),
		"critical_enter_inertia": r.Timing.CriticalEnterInertia.String(),
		"exit_inertia":           r.Timing.ExitInertia.String(), "min_episode": r.Timing.MinEpisode.String(), "merge_window": r.Timing.MergeWindow.String()},
		Frames: r.Frames, FPS: r.FPS, Dropped: r.Dropped, Messages: r.Messages, Goals: r.Goals, ClearMin: a.ClearTime.Minutes()}
	for _, s := range a.Spans {
		j.Segments = append(j.Segments, jsonSpan{s.Kind, s.Start.UnixMilli(), s.End.UnixMilli()})
	}
	for _, z := range a.PerZoneKind {
		j.Zones = append(j.Zones, jsonZoneKind{Kind: z.Kind, Zone: z.Zone, Affected: z.Affected, Detected: z.Detected, Segments: z.Segments,
			DecisionMS: msList(z.Decision), DeliveryMS: msList(z.Delivery), EpisodesPerSegment: z.EpisodesPerSegment, Flaps: z.Flaps,
			EndMS: msList(z.EndLatency), Coverage: z.Coverage()})
	}
	for _, ep := range a.False {
		j.False = append(j.False, ep.ID)
	}
	if d := r.Domain; d != nil {
		for _, z := range d.PerZoneKind {
			j.Domain = append(j.Domain, jsonZoneKind{Kind: z.Kind, Zone: z.Zone, Affected: z.Affected, Detected: z.Detected, Segments: z.Segments,
				DecisionMS: msList(z.Decision), DeliveryMS: msList(z.Delivery), EpisodesPerSegment: z.EpisodesPerSegment, Flaps: z.Flaps,
				EndMS: msList(z.EndLatency), Coverage: z.Coverage()})
		}
		j.DomainGoals = r.DomainGoals
		for _, ep := range d.False {
			j.DomainFalse = append(j.DomainFalse, ep.ID)
		}
	}
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), b, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(r.Markdown()), 0o644); err != nil {
		return err
	}
	if len(r.Tuning) > 0 {
		t := "# Timings replayed over the recorded zone metrics\n\n" + tuningTable(rankTuning(r.Tuning))
		if err := os.WriteFile(filepath.Join(dir, "tuning.md"), []byte(t), 0o644); err != nil {
			return err
		}
	}
	ta, eps := a, Episodes(events)
	if r.Domain != nil {
		// the camera's domain_shift episodes as the bottom row
		c := *a
		c.Zones = append([]string{DomainZone}, a.Zones...)
		ta, eps = &c, append(eps, DomainEpisodes(events)...)
	}
	return Timeline(filepath.Join(dir, "timeline.png"), ta, eps)
}

// rankTuning orders timings by goals met (more first), then flaps plus
// false episodes, then the worst end latency.
func rankTuning(ts []TuneResult) []TuneResult {
	out := slices.Clone(ts)
	score := func(t TuneResult) (met, bad int, end time.Duration) {
		for _, g := range t.Goals {
			if g.Met {
				met++
			}
		}
		p := t.Analysis.Pool()
		return met, t.Analysis.AllFlaps() + len(t.Analysis.False) + p.Missed, Quantile(p.EndLatency, 1)
	}
	slices.SortStableFunc(out, func(a, b TuneResult) int {
		am, ab, ae := score(a)
		bm, bb, be := score(b)
		return cmp.Or(cmp.Compare(bm, am), cmp.Compare(ab, bb), cmp.Compare(ae, be))
	})
	return out
}

func tuningTable(ts []TuneResult) string {
	var b strings.Builder
	b.WriteString("| fusion | enter (warn) | enter (critical) | exit | min episode | merge | goals met | detection p95 | flaps | missed | false | end max | coverage | per kind: detection p95 ms / flaps / end max ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, t := range ts {
		p := t.Analysis.Pool()
		cov := 0.0
		if p.Total > 0 {
			cov = p.Covered.Seconds() / p.Total.Seconds()
		}
		met := 0
		for _, g := range t.Goals {
			if g.Met {
				met++
			}
		}
		fmt.Fprintf(&b, "| %v | %v | %v | %v | %v | %v | %d/%d | %v | %d | %d | %d | %v | %.3f | %s |\n", t.Timing.FusionTimeConstant, t.Timing.EnterInertia,
			t.Timing.CriticalEnterInertia, t.Timing.ExitInertia, t.Timing.MinEpisode, t.Timing.MergeWindow, met, len(t.Goals), Quantile(p.Decision, 0.95).Round(time.Millisecond),
			t.Analysis.AllFlaps(), p.Missed, len(t.Analysis.False), Quantile(p.EndLatency, 1).Round(time.Millisecond), cov, perKind(t.Analysis))
	}
	return b.String()
}

// perKind summarizes each out-of-distribution kind over its zones:
// decision latency p95, flaps, worst end latency.
func perKind(a *Analysis) string {
	var kinds []string
	for _, z := range a.PerZoneKind {
		if !slices.Contains(kinds, z.Kind) {
			kinds = append(kinds, z.Kind)
		}
	}
	var parts []string
	for _, k := range kinds {
		var dec, end []time.Duration
		flaps := 0
		for _, z := range a.PerZoneKind {
			if z.Kind == k {
				dec = append(dec, z.Decision...)
				end = append(end, z.EndLatency...)
				flaps += z.Flaps
			}
		}
		parts = append(parts, fmt.Sprintf("%s %d/%d/%d", k, Quantile(dec, 0.95).Milliseconds(), flaps, Quantile(end, 1).Milliseconds()))
	}
	return strings.Join(parts, ", ")
}

// KindSummary are the goals' figures over the affected zones of one
// segment kind.
type KindSummary struct {
	Kind                          string
	Affected, Zones               int
	DecisionP95, DeliveryP95      time.Duration
	Flaps, Missed                 int
	EndMax, EndMaxDelivery        time.Duration
	Coverage                      float64
	DetectionMet, EpisodesMet     bool
	EndMet, CoverageMet, Detected bool
}

// Kinds summarizes every out-of-distribution kind over its affected zones.
func Kinds(a *Analysis) []KindSummary {
	var kinds []string
	for _, z := range a.PerZoneKind {
		if !slices.Contains(kinds, z.Kind) {
			kinds = append(kinds, z.Kind)
		}
	}
	var out []KindSummary
	for _, k := range kinds {
		s := KindSummary{Kind: k}
		var dec, del, end, endD []time.Duration
		var cov, tot time.Duration
		for _, z := range a.PerZoneKind {
			if z.Kind != k {
				continue
			}
			s.Zones++
			if !z.Affected {
				continue
			}
			s.Affected++
			dec, del = append(dec, z.Decision...), append(del, z.Delivery...)
			end, endD = append(end, z.EndLatency...), append(endD, z.EndDelivery...)
			s.Flaps += z.Flaps
			s.Missed += z.Segments - z.Detected
			cov += z.Covered
			tot += z.Total
		}
		s.Detected = s.Affected > 0
		s.DecisionP95, s.DeliveryP95 = Quantile(dec, 0.95), Quantile(del, 0.95)
		s.EndMax, s.EndMaxDelivery = Quantile(end, 1), Quantile(endD, 1)
		if tot > 0 {
			s.Coverage = cov.Seconds() / tot.Seconds()
		}
		s.DetectionMet = s.Detected && s.DeliveryP95 <= GoalDetection
		s.EpisodesMet = s.Detected && s.Flaps == 0 && s.Missed == 0
		s.EndMet = s.Detected && s.EndMaxDelivery <= GoalEnd
		s.CoverageMet = s.Detected && s.Coverage >= GoalCoverage
		out = append(out, s)
	}
	return out
}

func kindTable(a *Analysis) string {
	var b strings.Builder
	b.WriteString("| kind | affected zones | detection p95: deciding frame / subscriber | flaps, missed | end max: end frame / subscriber | coverage |\n|---|---|---|---|---|---|\n")
	mark := func(ok bool) string {
		if ok {
			return " (met)"
		}
		return " (not met)"
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
	for _, k := range Kinds(a) {
		if !k.Detected {
			fmt.Fprintf(&b, "| %s | 0 of %d | not detected | | | |\n", k.Kind, k.Zones)
			continue
		}
		fmt.Fprintf(&b, "| %s | %d of %d | %s / %s%s | %d, %d%s | %s / %s%s | %.3f%s |\n", k.Kind, k.Affected, k.Zones,
			ms(k.DecisionP95), ms(k.DeliveryP95), mark(k.DetectionMet), k.Flaps, k.Missed, mark(k.EpisodesMet),
			ms(k.EndMax), ms(k.EndMaxDelivery), mark(k.EndMet), k.Coverage, mark(k.CoverageMet))
	}
	return b.String()
}
