package calibrate

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/infer"
)

// TestRunSetsTauC calibrates a depth model with its own confidence (the
// seeded depth model with a Depth-Anything-3-like head, python3-onnx) on
// the tiny rendered data: calibrate adds the confidence_fraction
// criterion, tau_c is the upper edge of the bin holding the (1-FAR)
// quantile of the read-out u, so the share of pixels above it is at most
// FAR and at least FAR less that bin's pixels (counted here from u maps
// that ONNX Runtime computes again); the zone thresholds keep the
// calibration frames' confidence alarm rate at most FAR; the held-out
// split gets its own rate; the file round-trips.
func TestRunSetsTauC(t *testing.T) {
	data, cfg := testRig(t)
	mc := cfg.ModelsConfig()
	withConf := filepath.Join(filepath.Dir(mc.Depth), "depth_conf.onnx")
	line := testmodels.AddConfidenceHead(t, mc.Depth, withConf, "da3")
	if !strings.Contains(line, "ranking") {
		t.Fatalf("spec line %q", line)
	}
	mc.Depth = withConf
	mc.DepthSpec.Confidence = &infer.ConfidenceSpec{Name: "conf", Meaning: infer.ConfidenceRanking}
	const far = 0.05
	ctx := context.Background()
	res, err := Run(ctx, Options{Models: mc, Alerts: cfg.AlertsConfig.Config, Data: data, TargetFAR: far, HeldOutSplit: "test"})
	if err != nil {
		t.Fatal(err)
	}
	cal := res.Calibration
	if !res.HasConfidence || cal.TauC == nil || cal.Levels.ConfidenceFraction == nil || len(cal.TauCZones) != 4 {
		t.Fatalf("no tau_c: %+v", cal)
	}
	// Count from the models' own maps: every valid pixel of the val frames.
	sum, err := Shard(ctx, ShardOptions{Models: mc, Alerts: cfg.AlertsConfig.Config, Inputs: []Input{{Dir: data}}})
	if err != nil {
		t.Fatal(err)
	}
	key, inBin, _ := sum.Confidence.QuantileBin(1 - far)
	if HistUpper(key) != *cal.TauC {
		t.Fatalf("tau_c %g, the quantile bin's upper edge %g", *cal.TauC, HistUpper(key))
	}
	above := float64(sum.Confidence.N()-sum.Confidence.CountBelow(*cal.TauC)) / float64(sum.Confidence.N())
	if above > far || above < far-float64(inBin)/float64(sum.Confidence.N())-1e-9 {
		t.Fatalf("%.4f of the pixels above tau_c %g, want within [FAR - bin share, FAR] = [%.4f, %g]", above, *cal.TauC, far-float64(inBin)/float64(sum.Confidence.N()), far)
	}
	if res.ConfidenceAlarmRate > far {
		t.Fatalf("confidence alarm rate %g on the calibration frames, want <= %g", res.ConfidenceAlarmRate, far)
	}
	for z, v := range cal.TauCZones {
		if v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			t.Fatalf("tau_c_zones.%s = %g", z, v)
		}
	}
	if h := res.HeldOut; h == nil || h.Frames != 4 || !h.HasConfidence || h.Confidence < 0 || h.Confidence > 1 {
		t.Fatalf("held out %+v", res.HeldOut)
	}
	var b strings.Builder
	if err := alerts.WriteCalibration(&b, cal); err != nil {
		t.Fatal(err)
	}
	back, err := alerts.ParseCalibration("cal.yaml", []byte(b.String()))
	if err != nil || *back.TauC != *cal.TauC || back.TauCFor("r0c0") != cal.TauCFor("r0c0") {
		t.Fatalf("round trip: %v", err)
	}
	var sb strings.Builder
	res.WriteSummary(&sb)
	if !strings.Contains(sb.String(), "tau_c ") || !strings.Contains(sb.String(), "held-out test frames (4)") {
		t.Fatalf("summary:\n%s", sb.String())
	}
}
