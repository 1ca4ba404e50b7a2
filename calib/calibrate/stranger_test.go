package calibrate

import (
	"context"
	"errors"
	"testing"

	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/infer"
)

// TestCheckStrangerClosedForm: K/S uniform on 0.20..0.30 has its median
// near 0.25 (within a bin), below a validation p90 of 0.5: familiar. On
// 0.60..0.80 the median (0.70) is above it: a stranger, with the numbers.
// Without recorded validation there is nothing to compare.
func TestCheckStrangerClosedForm(t *testing.T) {
	hist := func(lo, hi float64) *Hist {
		var h Hist
		for i := 0; i <= 1000; i++ {
			h.Add(lo + (hi-lo)*float64(i)/1000)
		}
		return &h
	}
	v := &infer.AuxUEValidation{Frames: 16, KSP50: 0.3, KSP90: 0.5, KSP99: 0.6}
	if err := CheckStranger(hist(0.2, 0.3), v); err != nil {
		t.Fatalf("familiar data refused: %v", err)
	}
	err := CheckStranger(hist(0.6, 0.8), v)
	if !errors.Is(err, ErrStranger) {
		t.Fatalf("err %v, want ErrStranger", err)
	}
	testmodels.MustContain(t, err, "median K/S 0.7", "validation p90 0.5", "16 frames", "train auxue on this camera's data first", "--force")
	if err := CheckStranger(hist(0.6, 0.8), nil); err != nil {
		t.Fatalf("no recorded validation: %v", err)
	}
}

// TestMergeRefusesStrangers: the test rig's data with a recorded
// validation whose p90 lies below the data's median are refused, naming
// the numbers; Force calibrates anyway; a p90 above the median passes.
func TestMergeRefusesStrangers(t *testing.T) {
	data, cfg := testRig(t)
	s, err := Shard(context.Background(), ShardOptions{Models: cfg.ModelsConfig(), Alerts: cfg.AlertsConfig.Config, Inputs: []Input{{Dir: data}}})
	if err != nil {
		t.Fatal(err)
	}
	median := s.KS.Quantile(0.5)
	s.AuxUEValidation = &infer.AuxUEValidation{Frames: 4, KSP50: median / 4, KSP90: median / 2, KSP99: median}
	o := MergeOptions{TargetFAR: 0.05}
	_, err = Merge([]Named{{"s.json", s}}, o)
	if !errors.Is(err, ErrStranger) {
		t.Fatalf("err %v, want ErrStranger", err)
	}
	o.Force = true
	if _, err := Merge([]Named{{"s.json", s}}, o); err != nil {
		t.Fatalf("--force: %v", err)
	}
	s.AuxUEValidation.KSP90 = median * 2
	if _, err := Merge([]Named{{"s.json", s}}, MergeOptions{TargetFAR: 0.05}); err != nil {
		t.Fatalf("familiar data refused: %v", err)
	}
}
