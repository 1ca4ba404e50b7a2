package main

import (
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/offline"
	"github.com/didoedge/didoedge/offline/offlinetest"
)

// TestConfidenceThroughEvalQuick: a Metric3D-v2-like model (python3-onnx:
// depth d = ConvD0 + ConvD1 mean(rgb), confidence 1 - g/2 of the green
// channel) through `eval-quick`: its native-confidence figures equal the
// ones computed here from the closed forms of the depth and the read-out
// u = g/2 on the same frames and ground truth (AUSE and AURG of RMSE by
// metrics.Sparsifier, the no-ground-truth AUC by metrics.BinaryScores),
// and the text report prints the side-by-side table; `model run` draws
// the confidence in its panels and summarises it.
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
	// model run: the panel gains the confidence row, summary.json the
	// read-out's mean (the closed form's, frames at the input's size).
	run := filepath.Join(dir, "run")
	cli(t, "model", "run", "--images", filepath.Join(data, "*", "image_02", "data", "*.png"), "--depth", model, "--depth-spec", spec,
		"--auxue", aux, "--auxue-spec", auxSpec, "--out", run)
	var sum struct {
		Images []struct {
			Image      string             `json:"image"`
			Confidence map[string]float64 `json:"confidence"`
			Files      map[string]string  `json:"files"`
		} `json:"images"`
	}
	b, err := os.ReadFile(filepath.Join(run, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sum); err != nil || len(sum.Images) != len(items) {
		t.Fatalf("summary.json: %v, %d images", err, len(sum.Images))
	}
	for _, im := range sum.Images {
		rgb, w, h, err := offline.ReadImageRGB8(im.Image)
		if err != nil {
			t.Fatal(err)
		}
		mean := 0.0
		for i := range w * h {
			mean += testmodels.ConfidenceWant("metric3d", rgb[3*i], rgb[3*i+1], rgb[3*i+2])
		}
		mean /= float64(w * h)
		if got := im.Confidence["mean"]; math.Abs(got-mean) > 1e-5 {
			t.Errorf("%s: confidence mean %v, closed form %v", im.Image, got, mean)
		}
		f, err := os.Open(im.Files["panel"])
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil || cfg.Width != 2*w || cfg.Height != 3*(h+42) {
			t.Errorf("panel %s: %dx%d (%v), want %dx%d with the confidence row", im.Files["panel"], cfg.Width, cfg.Height, err, 2*w, 3*(h+42))
		}
	}
	text := cli(t, "eval-quick", "--depth", model, "--depth-spec", spec, "--auxue", aux, "--auxue-spec", auxSpec, "--data", data, "--split", "all")
	if !strings.Contains(text, "native confidence (relative_error_complement)") || !strings.Contains(text, "AuxUE (Laplace b; K/S for AUCs)") {
		t.Fatalf("no side-by-side table:\n%s", text)
	}
}
