package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/internal/testmodels"
)

// TestRuntimeCommandErrors: the runtime commands fail with messages that
// say what is missing and how to get it.
func TestRuntimeCommandErrors(t *testing.T) {
	empty := t.TempDir()
	tests := []struct {
		args  []string
		parts []string
	}{
		{[]string{"run"}, []string{"--config FILE is required"}},
		{[]string{"run", "--config", filepath.Join(empty, "none.yaml")}, []string{"none.yaml", "no such file"}},
		{[]string{"demo", "--models", empty}, []string{filepath.Join(empty, "MANIFEST"), "didoedge train depth", "didoedge train auxue"}},
		{[]string{"calibrate", "--out", "x.yaml"}, []string{"--data DIR and --out FILE are required"}},
		{[]string{"calibrate", "--data", empty, "--out", filepath.Join(empty, "c.yaml"), "--models", empty}, []string{"MANIFEST", "didoedge train"}},
		{[]string{"bench", "fast"}, []string{"usage: didoedge bench latency|soak"}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			env, _, errb := modelTestEnv()
			if code := run(context.Background(), env, tc.args); code != 1 {
				t.Fatalf("exit code %d, want 1; stderr %q", code, errb)
			}
			for _, p := range tc.parts {
				if !strings.Contains(errb.String(), p) {
					t.Fatalf("stderr %q does not contain %q", errb, p)
				}
			}
		})
	}
}

// TestCalibrateCommand renders a tiny data set with `didoedge sim render`
// and calibrates seeded test models on it with `didoedge calibrate`.
func TestCalibrateCommand(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	env, _, errb := modelTestEnv()
	if code := run(context.Background(), env, []string{"sim", "render", "--world", "outdoor", "--frames", "9", "--drives", "3",
		"--size", "32x64", "--workers", "2", "--out", data}); code != 0 {
		t.Fatalf("sim render: %s", errb)
	}
	models := filepath.Join(dir, "models")
	testmodels.WriteReference(t, models)
	out := filepath.Join(dir, "calibration.yaml")
	env, stdout, errb := modelTestEnv()
	if code := run(context.Background(), env, []string{"calibrate", "--data", data, "--models", models,
		"--target-far", "0.02", "--out", out}); code != 0 {
		t.Fatalf("calibrate: %s", errb)
	}
	cal, err := alerts.LoadCalibration(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tau_e", "coverage at nominal 0.90: before", "UCE (m, 15 bins)", "wrote " + out} {
		if !strings.Contains(stdout.String(), want) {
			t.Fatalf("report %q lacks %q", stdout, want)
		}
	}
	if cal.Meta["target_far"] != "0.02" || cal.Meta["frames"] != "3" || len(cal.TauEZones) != 4 {
		t.Fatalf("calibration meta %v zones %v", cal.Meta, cal.TauEZones)
	}
	if !strings.Contains(stdout.String(), fmt.Sprintf("coverage at nominal 0.90: before %s", fmt.Sprintf("%.4f", mustFloat(t, cal.Meta["coverage_before"])))) {
		t.Fatalf("printed coverage differs from the file's meta: %q vs %q", stdout, cal.Meta["coverage_before"])
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	var v float64
	if _, err := fmt.Sscan(s, &v); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return v
}
