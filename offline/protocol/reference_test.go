package protocol

import (
	"context"
	"path/filepath"
	"testing"
)

// TestTabularReproducesSynthFull runs the tabular experiment (supplementary
// A.2) of configs/eval-synth.yaml and checks every row against the committed
// reports/synth-full/results.json, made before the training kernels were
// rewritten (issue 21): the Linear and CosineSimilarity GEMM sums in the same
// order as before, so the networks train to the same weights and the rows
// must be equal to the report's 6 significant digits, mean and spread.
//
// The depth experiments cannot be held to the same standard: their
// convolutions now sum in a different order (implicit GEMM, other blocking),
// which changes float32 rounding, and 1500 training steps carry such
// differences into every weight (the earlier code's own results already
// depended on GOMAXPROCS). docs/eval.md compares the two full runs.
func TestTabularReproducesSynthFull(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the tabular experiment (about 10 s)")
	}
	c, err := LoadConfig(filepath.Join("..", "..", "configs", "eval-synth.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := ReadResults(filepath.Join("..", "..", "reports", "synth-full", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	tab := newTable(len(c.Seeds))
	if err := runTabular(context.Background(), c, tab); err != nil {
		t.Fatal(err)
	}
	rows, dropped := tab.rows()
	if len(dropped) > 0 {
		t.Fatalf("dropped rows: %v", dropped)
	}
	n := 0
	for _, r := range rows {
		want, ok := ref.Lookup(r.Method, r.Experiment, r.Corruption, r.Severity, r.Metric)
		if !ok {
			t.Errorf("%s %s %s %s: not in the reference", r.Method, r.Experiment, r.Corruption, r.Metric)
			continue
		}
		n++
		if round6(r.Mean) != want.Mean || round6(r.Std) != want.Std || r.Seeds != want.Seeds {
			t.Errorf("%s %s %s %s: mean %v std %v (%d seeds), reference %v %v (%d)", r.Method, r.Experiment,
				r.Corruption, r.Metric, round6(r.Mean), round6(r.Std), r.Seeds, want.Mean, want.Std, want.Seeds)
		}
	}
	if n < 14 {
		t.Fatalf("compared %d tabular rows, want the report's 14", n)
	}
}
