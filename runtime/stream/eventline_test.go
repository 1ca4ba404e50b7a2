package stream

import (
	"strings"
	"testing"

	"github.com/didoedge/didoedge/alerts"
)

// TestFormatEventNotQueued: an event the outbox could not store has no
// seq (0) and is printed as such, never with a seq another event owns.
func TestFormatEventNotQueued(t *testing.T) {
	ev := alerts.Event{Seq: 7, ID: "front-r0c0-1-1", Type: alerts.EventNew, Kind: alerts.KindZone, Zone: "r0c0",
		Level: alerts.LevelCritical, Reasons: []string{"ood_fraction"}, TimeMS: 1_700_000_000_000}
	if line := FormatEvent(&ev); !strings.HasSuffix(line, " seq=7 id=front-r0c0-1-1") {
		t.Fatalf("queued event: %q", line)
	}
	ev.Seq = 0
	line := FormatEvent(&ev)
	if !strings.HasSuffix(line, " NOT-QUEUED id=front-r0c0-1-1") || strings.Contains(line, "seq=") {
		t.Fatalf("event not queued: %q", line)
	}
}

func TestFormatDomainEvents(t *testing.T) {
	ev := alerts.Event{Seq: 3, ID: "front-domain-1-2", Type: alerts.EventNew, Kind: alerts.KindDomainShift, Camera: "front",
		Level: alerts.LevelWarn, Reasons: []string{alerts.ReasonDomainDistance}, TimeMS: 1_700_000_000_000,
		Domain: &alerts.DomainMetrics{Distance: 3, Smoothed: 2.5, Threshold: 0.86, WindowS: 1}}
	if line := FormatEvent(&ev); !strings.Contains(line, " camera=front domain_shift distance=2.5 over 1s threshold=0.86 reasons=domain_distance seq=3") {
		t.Errorf("domain_shift event: %q", line)
	}
	zone := alerts.Event{Seq: 4, ID: "front-r0c0-1-3", Type: alerts.EventNew, Kind: alerts.KindZone, Zone: "r0c0", DomainShift: true,
		Level: alerts.LevelCritical, Reasons: []string{"ood_fraction"}, TimeMS: 1_700_000_000_000}
	if line := FormatEvent(&zone); !strings.Contains(line, " zone=r0c0 domain_shift reasons=ood_fraction") {
		t.Errorf("flagged zone event: %q", line)
	}
}
