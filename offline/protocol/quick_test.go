package protocol

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestQuickConfig runs configs/eval-quick.yaml end to end (trains the main
// network, the ensemble members and every AuxUE, evaluates, writes the
// report), checks results.json's schema, that every expected row exists and
// is in range, that DIDO's clean sky AUC beats every aleatoric head's and
// that the report's verdict says so, and that a second run loads every model
// from the cache and reproduces the table exactly.
func TestQuickConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("trains models for about two minutes")
	}
	c, err := LoadConfig("../../configs/eval-quick.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	ctx := context.Background()
	res, curves, err := Run(ctx, c, Options{Out: out, Command: "go test", ConfigPath: "configs/eval-quick.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteReport(out, c, res, curves); err != nil {
		t.Fatal(err)
	}
	r, err := ReadResults(filepath.Join(out, "results.json")) // schema and finiteness
	if err != nil {
		t.Fatal(err)
	}
	heads := []string{}
	for _, h := range c.AuxUE.Heads {
		heads = append(heads, h+"_sep")
	}
	sevs := append([]int{0}, c.Severities...)
	need := func(method, exp string, sev int, metric string) Row {
		t.Helper()
		row, ok := r.Lookup(method, exp, corrFor(sev), sev, metric)
		if !ok {
			t.Fatalf("missing row %s %s S=%d %s", method, exp, sev, metric)
		}
		if row.Seeds != len(c.Seeds) {
			t.Errorf("%s %s S=%d %s: %d seeds, want %d", method, exp, sev, metric, row.Seeds, len(c.Seeds))
		}
		return row
	}
	for _, s := range sevs {
		for _, m := range append([]string{"dido_sep", MethodEnsemble, MethodInject, MethodGradient}, heads...) {
			for _, met := range []string{"auc", "aupr"} {
				if v := need(m, ExpSky, s, met).Mean; v < 0 || v > 1 {
					t.Errorf("%s sky %s S=%d = %v outside [0,1]", m, met, s, v)
				}
			}
			if v := need(m, ExpSky, s, "sky_all").Mean; v < 0 || v > 1 {
				t.Errorf("%s Sky-All S=%d = %v outside [0,1]", m, s, v)
			}
		}
		for _, h := range heads {
			for _, met := range []string{"ause_rel", "ause_rmse", "aurg_rel", "aurg_rmse", "uce"} {
				need(h, ExpAleatoric, s, met)
			}
			if v := need(h, ExpAleatoric, s, "ause_rmse").Mean; v < 0 {
				t.Errorf("%s AUSE-RMSE S=%d = %v < 0 (the oracle is the lower bound)", h, s, v)
			}
		}
		main := need(MethodMain, ExpMainTask, s, "absrel")
		if main.Std != 0 {
			t.Errorf("the frozen main model's AbsRel varies over seeds: %v", main.Std)
		}
		need(MethodEnsemble, ExpMainTask, s, "rmse")
	}
	for _, m := range []string{"dido_sep", MethodEnsemble, MethodGradient} {
		need(m, ExpDatasetChange, 0, "auc")
	}
	for _, m := range []string{"dido", MethodEnsemble} {
		for _, met := range []string{"mse", "auc", "aupr"} {
			need(m, ExpTabular, 0, met)
		}
	}
	// The report states the DIDO-vs-heads comparison as the numbers have it.
	dido := need("dido_sep", ExpSky, 0, "auc").Mean
	beats := true
	for _, h := range heads {
		if need(h, ExpSky, 0, "auc").Mean >= dido {
			beats = false
		}
	}
	t.Logf("clean sky AUC: dido_sep %.3f; DIDO beats every aleatoric head: %v", dido, beats)
	if !beats {
		// The check on the reduced run: DIDO (with the regularizer on
		// pixels without ground truth, auxue.unlabeled_kl) ranks the sky above
		// the ground-truth pixels better than any aleatoric scale does.
		t.Errorf("clean sky AUC of dido_sep %.3f does not beat every aleatoric head", dido)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("DIDO beats every head: %v.", beats); !strings.Contains(string(md), want) {
		t.Errorf("report.md lacks %q", want)
	}
	for _, p := range []string{"sparsification_rmse.png", "roc_sky.png", "pr_sky.png", "severity_sky_auc.png", "severity_aleatoric_ause_rmse.png"} {
		if st, err := os.Stat(filepath.Join(out, p)); err != nil || st.Size() < 1000 {
			t.Errorf("plot %s: %v", p, err)
		}
	}

	// The report written again from results.json and the cached plot data
	// (didoedge eval --report-only) is the same text.
	r2, err := ReadResults(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	cv, err := LoadCurves(CurvesPath(filepath.Join(out, "cache"), c))
	if err != nil {
		t.Fatal(err)
	}
	again := t.TempDir()
	if err := WriteReport(again, c, r2, cv); err != nil {
		t.Fatal(err)
	}
	if md2, err := os.ReadFile(filepath.Join(again, "report.md")); err != nil || string(md2) != string(md) {
		t.Errorf("report written from results.json differs from the run's (err %v)", err)
	}

	// Second run: every model comes from the cache, the table is identical.
	rerun, _, err := Run(ctx, c, Options{Out: out, Command: "go test", ConfigPath: "configs/eval-quick.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rerun.Runs) != len(res.Runs) {
		t.Fatalf("re-run has %d rows, first run %d", len(rerun.Runs), len(res.Runs))
	}
	for i, x := range rerun.Runs {
		y := res.Runs[i]
		if x.Method != y.Method || x.Metric != y.Metric || math.Abs(x.Mean-y.Mean) > 1e-12 {
			t.Fatalf("re-run row %d differs: %+v vs %+v", i, x, y)
		}
	}
	if s := rerun.Meta.WallSeconds["train_auxue"] + rerun.Meta.WallSeconds["train_ensemble"]; s > 5 {
		t.Errorf("re-run spent %.1f s training: the cache was not used", s)
	}
}
