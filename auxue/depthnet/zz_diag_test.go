package depthnet

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/didoedge/didoedge/calib/dataset"
)

func TestZZDiag(t *testing.T) {
	dir := os.Getenv("DIAG_MODELS")
	if dir == "" {
		t.Skip()
	}
	ctx := context.Background()
	dr, err := OpenDepthRunner(ctx, filepath.Join(dir, "depth.onnx"), filepath.Join(dir, "depth.yaml"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ar, err := OpenAuxRunner(filepath.Join(dir, "auxue.onnx"), "", 640, 192, dr.AuxChannels())
	if err != nil {
		t.Fatal(err)
	}
	ds, _ := dataset.OpenSim("../../out/data/outdoor-test")
	list, _ := items(ds, "all")
	var sums [4]float64
	var ns [4]int
	var dsky, dgt float64
	for _, it := range list[:8] {
		s, _ := ds.Load(it)
		_, d, f, err := dr.Predict(ctx, s.RGB, 640, 192)
		if err != nil {
			t.Fatal(err)
		}
		sc, ep, _ := ar.Predict(f)
		_ = sc
		for i := range ep {
			k := 2
			if s.Semantic[i] == 23 {
				k = 0
				dsky += float64(d[i])
			} else if s.Sparse[i] > 0 {
				k = 1
				dgt += float64(d[i])
			} else if i > 192*640/2 {
				k = 3
			}
			sums[k] += float64(ep[i])
			ns[k]++
		}
	}
	t.Logf("mean K/S: sky %.4f gt %.4f nogt-top %.4f nogt-bottom %.4f; mean depth sky %.1f gt %.1f", sums[0]/float64(ns[0]), sums[1]/float64(ns[1]), sums[2]/float64(ns[2]), sums[3]/float64(ns[3]), dsky/float64(ns[0]), dgt/float64(ns[1]))
}
