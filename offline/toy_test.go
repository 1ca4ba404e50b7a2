package offline

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/didoedge/didoedge/auxue"
)

// Real (shortened) toy trainings; the thresholds are the paper's qualitative
// claims of Fig. 2 turned into numbers.
func TestToyA(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two networks")
	}
	r, err := RunToy(context.Background(), ToyConfig{Dataset: ToyA, EpochsScale: 0.5, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	auc, err := r.OODAUC()
	if err != nil {
		t.Fatal(err)
	}
	left, right := r.MeanOn(r.Aleatoric, -3, 0), r.MeanOn(r.Aleatoric, 0, 3)
	t.Logf("AUC %.4f, Laplace scale %.3f on [-3,0], %.3f on [0,3]", auc, left, right)
	if auc < 0.95 {
		t.Errorf("epistemic AUC outside vs inside [-3,3] = %.4f, want >= 0.95", auc)
	}
	if !(left > right) {
		t.Errorf("mean Laplace scale %.3f on [-3,0] not above %.3f on [0,3]", left, right)
	}
}

func TestToyB(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two networks")
	}
	r, err := RunToy(context.Background(), ToyConfig{Dataset: ToyB, EpochsScale: 0.5, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	gap := r.MeanOn(r.Epistemic, -1, 3)
	train := (r.MeanOn(r.Epistemic, -3, -1) + r.MeanOn(r.Epistemic, 3, 5)) / 2
	t.Logf("mean K/S %.4f on (-1,3), %.4f on the training regions", gap, train)
	if !(gap >= 2*train) {
		t.Errorf("mean epistemic on (-1,3) = %.4f, want >= 2 x %.4f", gap, train)
	}
}

// BenchmarkToyStep measures one training step of each toy network on a
// batch of 64 (buffers are reused, so steady state should not allocate).
func BenchmarkToyStep(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	x, y := ToySample(ToyA, 256, rng)
	main := newToyMain(rng)
	reg := &regression{model: main, x: x, y: y, in: map[int]*tensor.Dense{}, dy: map[int]*tensor.Dense{}}
	idx := make([]int, 64)
	for i := range idx {
		idx[i] = i
	}
	b.Run("main", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := reg.Step(idx); err != nil {
				b.Fatal(err)
			}
		}
	})
	s := &auxue.Samples{Shape: []int{toyHidden}}
	pred, _ := toyPredict(main, x, &s.X)
	s.Err = make([]float32, len(x))
	for i := range x {
		s.Err[i] = y[i] - pred[i]
	}
	if err := s.Discretize(5); err != nil {
		b.Fatal(err)
	}
	m, _ := auxue.NewModel(auxue.Config{Form: auxue.FormVector, In: toyHidden, Hidden: toyHidden, K: 5, Lambda: 1e-3})
	obj, _ := auxue.NewAuxObjective(m, s, nil)
	b.Run("auxue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := obj.Step(idx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestParseSeeds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []uint64
		err  bool
	}{{"1-3", []uint64{1, 2, 3}, false}, {"7", []uint64{7}, false}, {"1,4,7-8", []uint64{1, 4, 7, 8}, false},
		{"3-1", nil, true}, {"x", nil, true}, {"1-", nil, true}, {"0-5000", nil, true}} {
		got, err := ParseSeeds(tc.in)
		if (err != nil) != tc.err || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%q: %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestSideAUC: with K/S = |x| on set A's grid, every point outside [-3,3]
// scores above every point inside, on both sides (AUC 1); with K/S = -x the
// right side scores below (AUC 0) and the left above (AUC 1).
func TestSideAUC(t *testing.T) {
	r := &ToyResult{Dataset: ToyA}
	for i := 0; i <= 140; i++ {
		x := float32(-7 + 0.1*float64(i))
		r.GridX = append(r.GridX, x)
		r.Epistemic = append(r.Epistemic, float32(math.Abs(float64(x))))
	}
	for _, left := range []bool{true, false} {
		if a, err := r.SideAUC(left); err != nil || a != 1 {
			t.Errorf("|x|, left %v: AUC %v (%v), want 1", left, a, err)
		}
	}
	for i, x := range r.GridX {
		r.Epistemic[i] = -x
	}
	if a, _ := r.SideAUC(true); a != 1 {
		t.Errorf("-x, left: AUC %v, want 1", a)
	}
	if a, _ := r.SideAUC(false); a != 0 {
		t.Errorf("-x, right: AUC %v, want 0", a)
	}
}

func FuzzParseSeeds(f *testing.F) {
	for _, s := range []string{"1-10", "3", "1,4,7-9", "9-1", "", "-", "1-99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		seeds, err := ParseSeeds(s)
		if err != nil {
			return
		}
		if len(seeds) == 0 || len(seeds) > 1000 {
			t.Fatalf("%q: %d seeds accepted", s, len(seeds))
		}
	})
}
