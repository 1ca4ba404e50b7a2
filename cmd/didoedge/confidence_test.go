package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/offline/offlinetest"
)

// TestConfidenceThroughEvalQuick: a Metric3D-v2-like model (python3-onnx:
// depth d = ConvD0 + ConvD1 mean(rgb), confidence 1 - g/2 of the green
// channel) through `eval-quick`: its native-confidence figures equal the
// ones computed here from the closed forms of the depth and the read-out
// u = g/2 on the same frames and ground truth (AUSE and AURG of RMSE by
// metrics.Sparsifier, the no-ground-truth AUC by metrics.BinaryScores),
// and the text report prints the side-by-side table.
func TestConfidenceThroughEvalQuick(t *testing.T) {
	dir := t.TempDir()
	model, spec := testmodels.ConfidenceModel(t, "metric3d", dir)
	aux, auxSpec := offlinetest.AuxUE(t, spec, dir)
	data := filepath.Join(dir, "data")
	cli(t, "sim", "render", "--world", "outdoor", "--frames", "3", "--drives", "1", "--size", "32x64",
		"--seed", "21", "--workers", "1", "--out", data)
	out := cli(t, "eval-quick", "--depth", model, "--depth-spec", spec, "--auxue", aux, "--auxue-spec", auxSpec, "--data", data, "--split", "all", "--json")
	var ev map[string]any
	if err := json.Unmarshal([]byte(out), &ev); err != nil {
		t.Fatalf("eval-quick: %v\n%s", err, out)
	}
	set, err := dataset.Open(dataset.Source{Dir: data})
	if err != nil {
		t.Fatal(err)
	}
	items, err := set.Items(dataset.SplitAll)
	if err != nil {
		t.Fatal(err)
	}
	var sp metrics.Sparsifier
	var rmse metrics.SparsMean
	var nogt metrics.BinaryScores
	for _, it := range items {
		s, err := set.Load(it)
		if err != nil {
			t.Fatal(err)
		}
		n := s.Width * s.Height
		d, u := make([]float32, n), make([]float32, n)
		gt, nogtMask := make([]bool, n), make([]bool, n)
		for i := range n {
			r, g, b := s.RGB[3*i], s.RGB[3*i+1], s.RGB[3*i+2]
			d[i] = float32(testmodels.ConventionDepth(r, g, b))
			u[i] = float32(testmodels.ConfidenceWant("metric3d", r, g, b))
			gt[i] = s.Sparse[i] > 0
			nogtMask[i] = !gt[i]
		}
		res, err := sp.Evaluate(d, s.Sparse, u, metrics.SparsRMSE)
		if err != nil {
			t.Fatal(err)
		}
		rmse.Add(res)
		nogt.AddMasked(u, nogtMask, true)
		nogt.AddMasked(u, gt, false)
	}
	ause, aurg, _ := rmse.Mean()
	auc, err := nogt.AUC()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key  string
		want float64
	}{{"confidence_ause_rmse", ause}, {"confidence_aurg_rmse", aurg}, {"confidence_no_gt_auc", auc}} {
		got, ok := ev[c.key].(float64)
		// float32 through the model: the read-out of 1 - (1 - g/2) may
		// differ from g/2 by an ulp and reorder ties; 1e-3 relative.
		if !ok || math.Abs(got-c.want) > 1e-3*math.Abs(c.want)+1e-6 {
			t.Errorf("%s = %v, computed %v", c.key, ev[c.key], c.want)
		}
	}
	if ev["confidence"] != "relative_error_complement" {
		t.Errorf("confidence meaning %v", ev["confidence"])
	}
	text := cli(t, "eval-quick", "--depth", model, "--depth-spec", spec, "--auxue", aux, "--auxue-spec", auxSpec, "--data", data, "--split", "all")
	if !strings.Contains(text, "native confidence (relative_error_complement)") || !strings.Contains(text, "AuxUE (Laplace b; K/S for AUCs)") {
		t.Fatalf("no side-by-side table:\n%s", text)
	}
}
