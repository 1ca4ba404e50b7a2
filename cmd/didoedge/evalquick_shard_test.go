package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/offline/offlinetest"
)

// TestEvalQuickShardMerge: `eval-quick shard` over 3 shards (outdoor and
// indoor frames in one listing) and `eval-quick merge` against the
// single-process `eval-quick`, for the reference pair and for a depth
// model with a native confidence output (a Metric3D-v2-like python3-onnx
// model), whose confidence figures merge as the AuxUE's do. Per-image
// means (AbsRel, RMSE, AUSE, AURG, Sky-All, per-image sky AUC) merge
// exactly (to summation order); pooled AUCs are within the tie bound the
// merge prints; the UCE within 1e-3 (fine bins whole in UCE bins); AUPR
// within 0.01 (bins as tie groups).
func TestEvalQuickShardMerge(t *testing.T) {
	dir := t.TempDir()
	render := func(world, out string) {
		env, _, errb := modelTestEnv()
		if code := run(context.Background(), env, []string{"sim", "render", "--world", world, "--frames", "4", "--drives", "2",
			"--size", "32x64", "--workers", "2", "--out", out}); code != 0 {
			t.Fatalf("sim render: %s", errb)
		}
	}
	data, indoor := filepath.Join(dir, "out"), filepath.Join(dir, "in")
	render("outdoor", data)
	render("indoor", indoor)
	models := filepath.Join(dir, "models")
	testmodels.WriteReference(t, models)
	confDir := filepath.Join(dir, "conf")
	os.Mkdir(confDir, 0o755)
	cm, cs := testmodels.ConfidenceModel(t, "metric3d", confDir)
	ca, cas := offlinetest.AuxUE(t, cs, confDir)
	for _, c := range []struct {
		name       string
		models     []string
		confidence bool
	}{
		{"reference", []string{"--models", models}, false},
		{"confidence", []string{"--depth", cm, "--depth-spec", cs, "--auxue", ca, "--auxue-spec", cas}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			shardMergeMatches(t, append([]string{"--data", data, "--indoor", indoor}, c.models...), c.confidence)
		})
	}
}

func shardMergeMatches(t *testing.T, common []string, confidence bool) {
	env, stdout, errb := modelTestEnv()
	if code := run(context.Background(), env, append([]string{"eval-quick", "--json"}, common...)); code != 0 {
		t.Fatalf("eval-quick: %s", errb)
	}
	var single map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &single); err != nil {
		t.Fatal(err)
	}
	sums := filepath.Join(t.TempDir(), "sums")
	os.Mkdir(sums, 0o755)
	for i := range 3 {
		env, stdout, errb := modelTestEnv()
		if code := run(context.Background(), env, append([]string{"eval-quick", "shard", "--index", fmt.Sprint(i), "--count", "3",
			"--out", filepath.Join(sums, "q-{index}.json")}, common...)); code != 0 {
			t.Fatalf("eval-quick shard %d: %s", i, errb)
		}
		if !strings.Contains(stdout.String(), "of 8; wrote") {
			t.Fatalf("shard %d: %s", i, stdout)
		}
	}
	env, stdout, errb = modelTestEnv()
	if code := run(context.Background(), env, []string{"eval-quick", "merge", sums}); code != 0 {
		t.Fatalf("eval-quick merge: %s", errb)
	}
	var merged map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &merged); err != nil {
		t.Fatal(err)
	}
	num := func(m map[string]any, k string) float64 {
		v, ok := m[k].(float64)
		if !ok {
			t.Fatalf("%s = %v in %v", k, m[k], m)
		}
		return v
	}
	exact := []string{"absrel", "rmse", "delta1", "ause_rmse", "aurg_rmse", "ause_absrel", "aurg_absrel", "sky_all", "sky_auc_per_image", "frames", "indoor_frames"}
	pooled := []string{"sky_auc", "no_gt_auc", "indoor_auc"}
	if confidence {
		exact = append(exact, "confidence_ause_rmse", "confidence_aurg_rmse", "confidence_ause_absrel", "confidence_aurg_absrel")
		pooled = append(pooled, "confidence_sky_auc", "confidence_no_gt_auc", "confidence_indoor_auc")
		if merged["confidence"] != single["confidence"] || single["confidence"] != "relative_error_complement" {
			t.Errorf("confidence meaning: merged %v, single %v", merged["confidence"], single["confidence"])
		}
	} else if merged["confidence_ause_rmse"] != nil || merged["confidence_sky_auc"] != nil {
		t.Errorf("confidence figures without a confidence output: %v, %v", merged["confidence_ause_rmse"], merged["confidence_sky_auc"])
	}
	for _, k := range exact {
		if a, b := num(merged, k), num(single, k); math.Abs(a-b) > 1e-9*math.Max(1, math.Abs(b)) {
			t.Errorf("%s: merged %g, single %g", k, a, b)
		}
	}
	bounds := merged["auc_tie_bound"].(map[string]any)
	for _, k := range pooled {
		a, b, bound := num(merged, k), num(single, k), num(bounds, k)
		if math.Abs(a-b) > bound+1e-12 {
			t.Errorf("%s: merged %g, single %g: beyond the tie bound %g", k, a, b, bound)
		}
		t.Logf("%s: merged %g, single %g, bound %.2g", k, a, b, bound)
	}
	if a, b := num(merged, "uce_laplace"), num(single, "uce_laplace"); math.Abs(a-b) > 1e-3 {
		t.Errorf("UCE: merged %g, single %g", a, b)
	}
	if a, b := num(merged, "sky_aupr"), num(single, "sky_aupr"); math.Abs(a-b) > 0.01 {
		t.Errorf("sky AUPR: merged %g, single %g", a, b)
	}
	// Two of three shards: refused.
	env, _, errb = modelTestEnv()
	if code := run(context.Background(), env, []string{"eval-quick", "merge", filepath.Join(sums, "q-0.json"), filepath.Join(sums, "q-1.json")}); code == 0 ||
		!strings.Contains(errb.String(), "shard(s) 2 of 3 missing") {
		t.Fatalf("partial merge: exit %d, %s", code, errb)
	}
}
