package stream

import (
	"fmt"
	"strings"
	"time"

	"github.com/didoedge/didoedge/alerts"
)

// FormatEvent renders an alert event as one human-readable line: the
// frame's raw metrics, then the fused values the level is decided on, e.g.
//
//	00:41:07.412 NEW    critical camera=front zone=ego_lane_near reasons=ood_fraction ood=0.62 p95=0.93 alea=0.01 fused ood=0.41 alea=0.01 seq=3 id=front-ego_lane_near-1763772067412-1
//
// An event that could not be queued (Seq 0) shows NOT-QUEUED instead of
// its seq.
func FormatEvent(ev *alerts.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-6s %-8s", time.UnixMilli(ev.TimeMS).Format("15:04:05.000"), strings.ToUpper(string(ev.Type)), ev.Level)
	if ev.Camera != "" {
		fmt.Fprintf(&b, " camera=%s", ev.Camera)
	}
	switch {
	case ev.Kind == alerts.KindZone:
		fmt.Fprintf(&b, " zone=%s", ev.Zone)
		if ev.DomainShift {
			b.WriteString(" domain_shift")
		}
	case ev.Domain != nil:
		fmt.Fprintf(&b, " %s distance=%.3g over %gs threshold=%.3g", ev.Kind, ev.Domain.Smoothed, ev.Domain.WindowS, ev.Domain.Threshold)
	default:
		fmt.Fprintf(&b, " %s=%s", ev.Kind, ev.Fault)
	}
	if len(ev.Reasons) > 0 {
		fmt.Fprintf(&b, " reasons=%s", strings.Join(ev.Reasons, ","))
	}
	if m := ev.Metrics; m != nil {
		fmt.Fprintf(&b, " ood=%.2f p95=%.2f alea=%.2f", m.OODFraction, m.EpistemicP95, m.AleatoricFraction)
		if f := m.Fused; f != nil {
			fmt.Fprintf(&b, " fused ood=%.2f alea=%.2f", f.OODFraction, f.AleatoricFraction)
		}
	}
	if ev.Seq == 0 {
		// Emit could not queue it: no seq belongs to it.
		fmt.Fprintf(&b, " NOT-QUEUED id=%s", ev.ID)
		return b.String()
	}
	fmt.Fprintf(&b, " seq=%d id=%s", ev.Seq, ev.ID)
	return b.String()
}

// FormatZones renders every zone's level and fused signals on one line, e.g.
//
//	00:41:07.412 zones  ego_lane_near=critical(ood 0.91 alea 0.02) road_ahead=ok(ood 0.00 alea 0.00)
func FormatZones(now time.Time, zs []alerts.ZoneStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s zones ", now.Format("15:04:05.000"))
	for _, z := range zs {
		fmt.Fprintf(&b, " %s=%s(ood %.2f alea %.2f)", z.Name, z.Level, z.Fused.OODFraction, z.Fused.AleatoricFraction)
	}
	return b.String()
}
