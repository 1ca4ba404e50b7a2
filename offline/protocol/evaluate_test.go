package protocol

import (
	"context"
	"math"
	"reflect"
	"strings"
	"testing"
)

// The seeds are trained and evaluated concurrently, each on its own models
// and buffers: a run over seeds 1 and 2 must give, for every row, exactly
// the mean of the runs over seed 1 alone and seed 2 alone (and their sample
// standard deviation |v1 - v2|/sqrt(2)). A buffer shared by mistake between
// the seeds, or a seed reading another's model, breaks the equality.
func TestSeedsEvaluateIndependently(t *testing.T) {
	text := strings.NewReplacer(
		"seeds: [1]", "seeds: [1, 2]",
		"corruptions: [fog]", "baselines: {ensemble_members: 2, inject_samples: 2, inject_p: 0.2, gradient: true}\ncorruptions: [fog]",
		"heads: [laplace]", "heads: [laplace, nig], unlabeled_kl: 0.1, global_context_bands: 4, outliers: 0.25",
		"test_frames: 1", "test_frames: 2",
	).Replace(minimalConfig)
	cache := t.TempDir()
	run := func(seeds string) *Results {
		t.Helper()
		c, err := ParseConfig([]byte(strings.Replace(text, "seeds: [1, 2]", "seeds: "+seeds, 1)), "seeds.yaml")
		if err != nil {
			t.Fatal(err)
		}
		res, _, err := Run(context.Background(), c, Options{Out: t.TempDir(), Cache: cache})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	both, one, two := run("[1, 2]"), run("[1]"), run("[2]")
	if len(both.Runs) < 50 {
		t.Fatalf("only %d rows", len(both.Runs))
	}
	for _, r := range both.Runs {
		a, ok1 := one.Lookup(r.Method, r.Experiment, r.Corruption, r.Severity, r.Metric)
		b, ok2 := two.Lookup(r.Method, r.Experiment, r.Corruption, r.Severity, r.Metric)
		if !ok1 || !ok2 || r.Seeds != 2 {
			t.Fatalf("%+v: single-seed rows %v %v", r, ok1, ok2)
		}
		mean, std := (a.Mean+b.Mean)/2, math.Abs(a.Mean-b.Mean)/math.Sqrt2
		tol := 1e-9 * max(1, math.Abs(mean))
		if math.Abs(r.Mean-mean) > tol || math.Abs(r.Std-std) > tol+1e-9*std {
			t.Errorf("%s %s %s S=%d %s: mean %v std %v, want %v and %v (seeds alone: %v, %v)",
				r.Method, r.Experiment, r.Corruption, r.Severity, r.Metric, r.Mean, r.Std, mean, std, a.Mean, b.Mean)
		}
	}
}

func TestCurvesRoundTrip(t *testing.T) {
	cv := &Curves{Fractions: []float64{0, 0.5, 1}, Spars: map[string][]float64{"dido_sep": {3, 2, 0}},
		OracleMain: []float64{3, 1, 0}, SkyScores: map[string][]float32{"dido_sep": {0.1, 0.9}},
		SkyLabels: map[string][]bool{"dido_sep": {false, true}}, MethodOrder: []string{"dido_sep"}}
	path := t.TempDir() + "/curves.gob"
	if err := SaveCurves(path, cv); err != nil {
		t.Fatal(err)
	}
	got, err := LoadCurves(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, cv) {
		t.Fatalf("round trip: %+v, want %+v", got, cv)
	}
	cv.SkyLabels["dido_sep"] = cv.SkyLabels["dido_sep"][:1]
	if err := SaveCurves(path, cv); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCurves(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("scores without labels: error %v, want one naming %s", err, path)
	}
	if _, err := LoadCurves(path + ".missing"); err == nil || !strings.Contains(err.Error(), "run the evaluation first") {
		t.Fatalf("missing file: %v", err)
	}
}
