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
