package bench

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/didoedge/didoedge/alerts"
)

// Segment kinds of a scenario drive. Clear is in-distribution driving;
// every other kind is out of distribution.
const (
	KindClear    = "clear"
	KindFog      = "fog"
	KindNoise    = "noise"
	KindNight    = "night"
	KindIndoor   = "indoor"
	KindObstacle = "obstacle"
	// KindNewCam is the same roads seen by another camera (sim.CameraNewCam).
	KindNewCam = "newcam"
)

// Span is one ground-truth segment of a drive: [Start, End) in wall time.
type Span struct {
	Kind       string
	Start, End time.Time
}

// Received is an alert event as the subscriber got it.
type Received struct {
	Event alerts.Event
	At    time.Time // when the subscriber received it
}

// Episode is one episode id as the events tell it.
type Episode struct {
	ID, Zone string
	// Start is the new event's frame time, StartReceived when the
	// subscriber got it.
	Start, StartReceived time.Time
	// End is the end event's frame time (zero: never ended).
	End, EndReceived time.Time
	MaxLevel         alerts.Level
	// Reopened counts returns within the merge window (updates from ok).
	Reopened int
}

// Episodes groups zone events by episode id (duplicates by seq dropped),
// in order of their start.
func Episodes(evs []Received) []Episode {
	byID := map[string]*Episode{}
	var order []string
	seen := map[uint64]bool{}
	for _, r := range evs {
		ev := r.Event
		if ev.Kind != alerts.KindZone || (ev.Seq != 0 && seen[ev.Seq]) {
			continue
		}
		seen[ev.Seq] = true
		ep, ok := byID[ev.ID]
		if !ok {
			ep = &Episode{ID: ev.ID, Zone: ev.Zone, Start: time.UnixMilli(ev.StartMS)}
			byID[ev.ID] = ep
			order = append(order, ev.ID)
		}
		switch ev.Type {
		case alerts.EventNew:
			ep.Start, ep.StartReceived = time.UnixMilli(ev.TimeMS), r.At
		case alerts.EventEnd:
			ep.End, ep.EndReceived = time.UnixMilli(ev.TimeMS), r.At
		case alerts.EventUpdate:
			if ev.Previous == alerts.LevelOK {
				ep.Reopened++
			}
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

// ZoneKind are the figures of one zone over the segments of one kind.
type ZoneKind struct {
	Zone, Kind string
	Segments   int
	// Detected counts segments in which an episode of the zone was open at
	// some time; Affected is Detected >= half of Segments.
	Detected int
	Affected bool
	// Decision latencies (the deciding frame's capture time minus the
	// segment start) and delivery latencies (subscriber receive time minus
	// the segment start) of the detected segments.
	Decision, Delivery []time.Duration
	// Episodes per segment (attributed as in Analyze).
	EpisodesPerSegment []int
	// Flaps: episodes beyond the first, summed over the segments.
	Flaps int
	// EndLatency: end event frame time minus the segment's end, for the
	// segment's last episode (the return to clear); EndDelivery the same
	// at the subscriber.
	EndLatency, EndDelivery []time.Duration
	// Covered is the segment time with an open episode of the zone; Total
	// the segments' time.
	Covered, Total time.Duration
}

// Coverage is Covered / Total.
func (z ZoneKind) Coverage() float64 {
	if z.Total <= 0 {
		return 0
	}
	return z.Covered.Seconds() / z.Total.Seconds()
}

// Analysis is what a drive's events say against its ground truth.
type Analysis struct {
	Zones []string
	Spans []Span
	// PerZoneKind lists every zone for every out-of-distribution kind.
	PerZoneKind []ZoneKind
	// ClearTime is the clear driving counted for false episodes (segments
	// after their first Grace and outside Grace after an OOD segment).
	ClearTime time.Duration
	// False are the episodes that started in that clear time.
	False []Episode
	// Grace is how long after an OOD segment ends an episode that starts
	// still belongs to it (a flap), and how long after the start of the
	// drive nothing counts.
	Grace time.Duration
}

// FalsePerHour is the false episodes per hour of counted clear driving.
func (a *Analysis) FalsePerHour() float64 {
	if a.ClearTime <= 0 {
		return 0
	}
	return float64(len(a.False)) / a.ClearTime.Hours()
}

// Analyze attributes every episode to a segment: the one in which it
// started, or, for an episode that starts in clear driving within grace
// after an OOD segment ended, that OOD segment (a late flap). Episodes
// starting elsewhere in clear driving are false episodes.
func Analyze(spans []Span, zones []string, eps []Episode, grace time.Duration, runEnd time.Time) *Analysis {
	a := &Analysis{Zones: zones, Spans: spans, Grace: grace}
	attributed := make(map[int][]Episode) // span index -> episodes
	for _, ep := range eps {
		si := spanAt(spans, ep.Start)
		switch {
		case si < 0:
			continue
		case spans[si].Kind != KindClear:
			attributed[si] = append(attributed[si], ep)
		case si > 0 && spans[si-1].Kind != KindClear && ep.Start.Sub(spans[si-1].End) < grace:
			attributed[si-1] = append(attributed[si-1], ep)
		case si == 0 && ep.Start.Sub(spans[0].Start) < grace:
			// start-up: the fusion state settles
		default:
			a.False = append(a.False, ep)
		}
	}
	for i, sp := range spans {
		if sp.Kind != KindClear {
			continue
		}
		from := sp.Start
		if i == 0 || spans[i-1].Kind != KindClear {
			from = from.Add(grace)
		}
		if sp.End.After(from) {
			a.ClearTime += sp.End.Sub(from)
		}
	}
	kinds := []string{}
	for _, sp := range spans {
		if sp.Kind != KindClear && !slices.Contains(kinds, sp.Kind) {
			kinds = append(kinds, sp.Kind)
		}
	}
	for _, kind := range kinds {
		for _, zone := range zones {
			zk := ZoneKind{Zone: zone, Kind: kind}
			for si, sp := range spans {
				if sp.Kind != kind {
					continue
				}
				zk.Segments++
				zk.Total += sp.End.Sub(sp.Start)
				var mine []Episode
				for _, ep := range attributed[si] {
					if ep.Zone == zone {
						mine = append(mine, ep)
					}
				}
				// Episodes open at the segment start (carried over) count
				// for coverage and detection too.
				var overlapping []Episode
				for _, ep := range eps {
					if ep.Zone == zone && ep.Start.Before(sp.End) && (ep.End.IsZero() || ep.End.After(sp.Start)) {
						overlapping = append(overlapping, ep)
					}
				}
				zk.EpisodesPerSegment = append(zk.EpisodesPerSegment, len(mine))
				zk.Flaps += max(0, len(mine)-1)
				zk.Covered += covered(overlapping, sp.Start, sp.End, runEnd)
				if len(overlapping) > 0 {
					zk.Detected++
					first := overlapping[0]
					d, r := first.Start.Sub(sp.Start), first.StartReceived.Sub(sp.Start)
					zk.Decision = append(zk.Decision, max(d, 0))
					zk.Delivery = append(zk.Delivery, max(r, 0))
				}
				if len(mine) > 0 {
					last := mine[len(mine)-1]
					if last.End.IsZero() {
						zk.EndLatency = append(zk.EndLatency, runEnd.Sub(sp.End)) // never ended: as long as the run
						zk.EndDelivery = append(zk.EndDelivery, runEnd.Sub(sp.End))
					} else {
						zk.EndLatency = append(zk.EndLatency, last.End.Sub(sp.End))
						zk.EndDelivery = append(zk.EndDelivery, last.EndReceived.Sub(sp.End))
					}
				}
			}
			zk.Affected = zk.Segments > 0 && 2*zk.Detected >= zk.Segments
			a.PerZoneKind = append(a.PerZoneKind, zk)
		}
	}
	return a
}

// spanAt is the index of the span holding t, -1 if none.
func spanAt(spans []Span, t time.Time) int {
	for i, sp := range spans {
		if !t.Before(sp.Start) && t.Before(sp.End) {
			return i
		}
	}
	return -1
}

// covered is the time of [from, to) inside the union of the episodes'
// [Start, End) (an episode never ended runs until runEnd).
func covered(eps []Episode, from, to, runEnd time.Time) time.Duration {
	type iv struct{ a, b time.Time }
	var ivs []iv
	for _, ep := range eps {
		end := ep.End
		if end.IsZero() {
			end = runEnd
		}
		a, b := maxTime(ep.Start, from), minTime(end, to)
		if b.After(a) {
			ivs = append(ivs, iv{a, b})
		}
	}
	slices.SortFunc(ivs, func(x, y iv) int { return x.a.Compare(y.a) })
	var total time.Duration
	var cur iv
	for i, v := range ivs {
		switch {
		case i == 0:
			cur = v
		case !v.a.After(cur.b):
			cur.b = maxTime(cur.b, v.b)
		default:
			total += cur.b.Sub(cur.a)
			cur = v
		}
	}
	if len(ivs) > 0 {
		total += cur.b.Sub(cur.a)
	}
	return total
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Quantile is the nearest-rank q-quantile of v (0 for an empty v).
func Quantile(v []time.Duration, q float64) time.Duration {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	k := max(0, min(len(s)-1, int(math.Ceil(q*float64(len(s))))-1))
	return s[k]
}

// Goal is one target of the scenario benchmark and whether it was met.
type Goal struct {
	Name, Target, Value string
	Met                 bool
}

// Pooled collects the figures of the affected (zone, kind) pairs.
type Pooled struct {
	Decision, Delivery, EndLatency, EndDelivery []time.Duration
	Flaps, Missed                               int
	Covered, Total                              time.Duration
}

// Pool pools the affected pairs; Missed counts their undetected segments.
func (a *Analysis) Pool() Pooled {
	var p Pooled
	for _, zk := range a.PerZoneKind {
		if !zk.Affected {
			continue
		}
		p.Decision = append(p.Decision, zk.Decision...)
		p.Delivery = append(p.Delivery, zk.Delivery...)
		p.EndLatency = append(p.EndLatency, zk.EndLatency...)
		p.EndDelivery = append(p.EndDelivery, zk.EndDelivery...)
		p.Flaps += zk.Flaps
		p.Missed += zk.Segments - zk.Detected
		p.Covered += zk.Covered
		p.Total += zk.Total
	}
	return p
}

// AllFlaps counts flaps over every (zone, kind) pair, affected or not.
func (a *Analysis) AllFlaps() int {
	n := 0
	for _, zk := range a.PerZoneKind {
		n += zk.Flaps
	}
	return n
}

// sortZoneKinds orders by kind, then zone.
func sortZoneKinds(z []ZoneKind) {
	slices.SortStableFunc(z, func(a, b ZoneKind) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Zone, b.Zone))
	})
}

// Signal are the raw (unfused) zone metrics of one zone over the frames of
// one segment kind, and the events that named the aleatoric criterion.
type Signal struct {
	Kind, Zone string
	Frames     int
	// OODMean and AleaMean are the mean ood_fraction and aleatoric_fraction;
	// OODP95 and AleaP95 their 95th percentiles.
	OODMean, OODP95, AleaMean, AleaP95 float64
	// AleaWarn is the share of frames whose aleatoric_fraction reaches the
	// warn entry of the aleatoric criterion.
	AleaWarn float64
	// AleaEvents counts events of the zone in segments of this kind whose
	// reasons include aleatoric_fraction.
	AleaEvents int
}

// SignalTable summarizes the recorded zone metrics per kind and zone
// (frames within skip of a segment start are left out: the fusion and the
// transport settle), with aleaWarn the aleatoric criterion's warn entry.
func SignalTable(frames []FrameMetrics, spans []Span, zones []string, aleaWarn float64, evs []Received, skip time.Duration) []Signal {
	kinds := []string{}
	for _, sp := range spans {
		if !slices.Contains(kinds, sp.Kind) {
			kinds = append(kinds, sp.Kind)
		}
	}
	var out []Signal
	for _, kind := range kinds {
		for zi, zone := range zones {
			s := Signal{Kind: kind, Zone: zone}
			var ood, alea []float64
			for _, f := range frames {
				si := spanAt(spans, f.Capture)
				if si < 0 || spans[si].Kind != kind || f.Capture.Sub(spans[si].Start) < skip || zi >= len(f.OOD) {
					continue
				}
				ood = append(ood, float64(f.OOD[zi]))
				alea = append(alea, float64(f.Alea[zi]))
				if aleaWarn > 0 && float64(f.Alea[zi]) >= aleaWarn {
					s.AleaWarn++
				}
			}
			s.Frames = len(ood)
			if s.Frames > 0 {
				s.OODMean, s.OODP95 = mean(ood), quantileF(ood, 0.95)
				s.AleaMean, s.AleaP95 = mean(alea), quantileF(alea, 0.95)
				s.AleaWarn /= float64(s.Frames)
			}
			for _, r := range evs {
				si := spanAt(spans, time.UnixMilli(r.Event.TimeMS))
				if r.Event.Zone == zone && si >= 0 && spans[si].Kind == kind && slices.Contains(r.Event.Reasons, "aleatoric_fraction") {
					s.AleaEvents++
				}
			}
			out = append(out, s)
		}
	}
	return out
}

// FrameMetrics are one frame's raw zone metrics, in zone order.
type FrameMetrics struct {
	Capture   time.Time
	OOD, Alea []float32
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func quantileF(v []float64, q float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	k := max(0, min(len(s)-1, int(math.Ceil(q*float64(len(s))))-1))
	return s[k]
}
