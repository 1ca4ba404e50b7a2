package stream

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// confidenceCalibration alarms on the native confidence alone: tau_c 0,
// so every pixel with a finite read-out u = 1/conf > 0 counts, and the
// epistemic criterion is quiet (tau_e 1).
const confidenceCalibration = `version: 1
tau_e: 1
tau_a: 1000
tau_c: 0
scale_correction: 1
coverage: 0.9
levels:
  ood_fraction: {warn: {enter: 0.5, exit: 0.4}, critical: {enter: 0.9, exit: 0.8}}
  confidence_fraction: {warn: {enter: 0.5, exit: 0.4}, critical: {enter: 0.9, exit: 0.8}}
`

// newConfidenceSetup is newTestSetup with the test depth model given a
// Depth-Anything-3-like confidence head (python3-onnx) and its spec line.
func newConfidenceSetup(t *testing.T) *testSetup {
	t.Helper()
	s := newTestSetup(t, "confidence.yaml", testmodels.ConfigZones)
	depth := filepath.Join(s.dir, "depth.onnx")
	line := testmodels.AddConfidenceHead(t, depth, depth, "da3")
	if err := os.WriteFile(filepath.Join(s.dir, "confidence.yaml"), []byte(confidenceCalibration), 0o644); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	withConf := strings.Replace(string(text), "    features: [{name: features}]\n", "    features: [{name: features}]\n    confidence: "+line+"\n", 1)
	if withConf == string(text) {
		t.Fatal("config template changed: no features line to put the confidence after")
	}
	if err := os.WriteFile(s.config, []byte(withConf), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConfidenceCriterionThroughPipeline: frames through a depth model
// with its own confidence raise critical confidence_fraction episodes in
// both zones (the reason, and the fraction 1 in the metrics), received by
// a real MQTT subscriber; the frame path, alerts included, allocates
// nothing with the confidence read.
func TestConfidenceCriterionThroughPipeline(t *testing.T) {
	s := newConfidenceSetup(t)
	p, _, stop := startPipeline(t, s, 20, nil)
	sub := subscribe(t, p.BrokerAddr(), "didoedge/testcar/front/events")
	waitFor(t, 30*time.Second, "critical confidence_fraction events for both zones", func() bool {
		c := countEvents(sub.snapshot(), alerts.EventNew, alerts.LevelCritical)
		return c["r0c0"] == 1 && c["r0c1"] == 1
	})
	for _, ev := range sub.snapshot() {
		if ev.Type != alerts.EventNew {
			continue
		}
		if !slices.Equal(ev.Reasons, []string{"confidence_fraction"}) || ev.Metrics == nil || ev.Metrics.ConfidenceFraction == nil ||
			*ev.Metrics.ConfidenceFraction != 1 || ev.Metrics.OODFraction != 0 {
			t.Fatalf("event %+v metrics %+v", ev, ev.Metrics)
		}
	}
	for _, ev := range sub.snapshot() {
		if ev.Type == alerts.EventNew {
			if line := FormatEvent(&ev); !strings.Contains(line, " conf=1.00 fused ood=0.00 alea=0.00 conf=") {
				t.Fatalf("event line %q does not show the confidence fractions", line)
			}
			break
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}

	cfg, err := runconfig.Load(s.config)
	if err != nil {
		t.Fatal(err)
	}
	idle, err := New(context.Background(), cfg, Options{Source: camera.NewMailbox()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idle.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for !idle.sink.connected() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	ctx := context.Background()
	f := testFrame(2*testW, 2*testH)
	idle.cams[0].process(ctx, f)
	allocs := math.Inf(1)
	for range 3 {
		allocs = min(allocs, testing.AllocsPerRun(20, func() {
			f.Seq++
			f.Capture = time.Now()
			idle.cams[0].process(ctx, f)
		}))
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per frame with a confidence output, want 0", allocs)
	}
}
