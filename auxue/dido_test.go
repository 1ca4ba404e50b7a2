package auxue

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/pkg/nn/gradcheck"
)

type classLoss interface {
	Loss(logits []float32, n, hw int, bins []int32, grad []float32) (float64, int, error)
}

func TestClassLossGradients(t *testing.T) {
	layouts := []struct {
		name  string
		n, hw int
	}{{"NCHW", 2, 3}, {"vectors", 5, 1}}
	losses := []struct {
		name string
		loss classLoss
		k    int
	}{
		{"dido lambda=0.01", DIDOLoss{K: 4, Lambda: 0.01}, 4},
		{"dido lambda=1", DIDOLoss{K: 4, Lambda: 1}, 4},
		{"dido K=2 lambda=0.1", DIDOLoss{K: 2, Lambda: 0.1}, 2},
		{"dido unlabeled gamma=0.5", DIDOLoss{K: 4, Lambda: 0.1, UnlabeledWeight: 0.5}, 4},
		{"categorical", CategoricalLoss{K: 4}, 4},
	}
	for _, lo := range layouts {
		for _, ls := range losses {
			t.Run(lo.name+"/"+ls.name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(3, uint64(lo.n*10+ls.k)))
				logits := make([]float32, lo.n*ls.k*lo.hw)
				for i := range logits {
					logits[i] = float32(rng.Float64()*4 - 2)
				}
				bins := make([]int32, lo.n*lo.hw)
				for i := range bins {
					bins[i] = int32(rng.IntN(ls.k))
				}
				bins[1] = -1 // no target: skipped, or only the regularizer with UnlabeledWeight
				unlabeledKL := false
				if d, ok := ls.loss.(DIDOLoss); ok && d.UnlabeledWeight > 0 {
					unlabeledKL = true
				}
				grad := make([]float32, len(logits))
				if _, n, err := ls.loss.Loss(logits, lo.n, lo.hw, bins, grad); err != nil || n != len(bins)-1 {
					t.Fatalf("count %d err %v", n, err)
				}
				num := gradcheck.NumericGrad(func() float64 {
					v, _, _ := ls.loss.Loss(logits, lo.n, lo.hw, bins, nil)
					return v
				}, logits, 1e-3)
				if err := gradcheck.Check(grad, num, gradcheck.Tolerance{Rel: 2e-3, Abs: 1e-5}); err != nil {
					t.Error(err)
				}
				// Element 1 (image 0 pixel 1, or vector 1) is skipped, or
				// only pulled towards Dir(1) by the regularizer.
				var unlabeledGrad float64
				for c := 0; c < ls.k; c++ {
					idx := c*lo.hw + 1
					if lo.hw == 1 {
						idx = 1*ls.k + c
					}
					if !unlabeledKL && grad[idx] != 0 {
						t.Errorf("skipped element has gradient %v", grad[idx])
					}
					unlabeledGrad += math.Abs(float64(grad[idx]))
				}
				if unlabeledKL && unlabeledGrad < 1e-4 {
					t.Errorf("unlabeled element: |gradient| %.2g, want the regularizer's", unlabeledGrad)
				}
			})
		}
	}
}

func TestDIDOClosedForms(t *testing.T) {
	// No evidence: alpha = 1, S = K, loss = psi(K) - psi(1) = H_{K-1}, KL = 0.
	d := DIDOLoss{K: 4, Lambda: 0.5}
	got, _, err := d.Loss([]float32{-100, -100, -100, -100}, 1, 1, []int32{2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + 0.5 + 1.0/3; math.Abs(got-want) > 1e-12 {
		t.Errorf("no-evidence loss %v, want H_3 = %v", got, want)
	}
	// K = 2, alpha = (2, 1): Dir = Beta(2,1) with density 2x, so
	// KL = ln 2 + E[ln x] = ln 2 + psi(2) - psi(3) = ln 2 - 1/2 and the
	// data term is psi(3) - psi(2) = 1/2: total ln 2 with Lambda = 1.
	d = DIDOLoss{K: 2, Lambda: 1}
	got, _, _ = d.Loss([]float32{0, -100}, 1, 1, []int32{0}, nil)
	if math.Abs(got-math.Ln2) > 1e-12 {
		t.Errorf("Beta(2,1) loss %v, want ln 2", got)
	}
	// Read-outs: evidence 3 on each of 4 classes gives S = 16, K/S = 1/4;
	// the argmax follows the largest logit.
	d = DIDOLoss{K: 4}
	l3 := float32(math.Log(3))
	logits := []float32{l3, l3, l3, l3, -100, 5, -100, -100} // (N=2, K=4)
	out, arg := make([]float32, 2), make([]int32, 2)
	if err := d.Epistemic(logits, 2, 1, out, arg); err != nil {
		t.Fatal(err)
	}
	wantU := 4 / (4 + math.Exp(5) + 3*math.Exp(-100))
	if math.Abs(float64(out[0])-0.25) > 1e-6 || math.Abs(float64(out[1])-wantU) > 1e-6 || arg[1] != 1 {
		t.Errorf("epistemic %v argmax %v", out, arg)
	}
	// A clamped logit contributes exp(MaxLogit) and no gradient.
	d = DIDOLoss{K: 2, Lambda: 0.01, MaxLogit: 10}
	grad := make([]float32, 2)
	if _, _, err := d.Loss([]float32{50, 0}, 1, 1, []int32{0}, grad); err != nil {
		t.Fatal(err)
	}
	if grad[0] != 0 || grad[1] == 0 {
		t.Errorf("clamped gradient %v", grad)
	}
	// Categorical: uniform logits give cross-entropy and entropy ln K.
	c := CategoricalLoss{K: 8}
	u := make([]float32, 8)
	ce, _, _ := c.Loss(u, 1, 1, []int32{5}, nil)
	h := make([]float32, 1)
	if err := c.Entropy(u, 1, 1, h); err != nil {
		t.Fatal(err)
	}
	if math.Abs(ce-math.Log(8)) > 1e-9 || math.Abs(float64(h[0])-math.Log(8)) > 1e-6 {
		t.Errorf("uniform CE %v entropy %v, want ln 8", ce, h[0])
	}
}

func TestClassLossBadInput(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name    string
		loss    classLoss
		logits  []float32
		n       int
		bins    []int32
		grad    []float32
		wantErr string
	}{
		{"K<2 dido", DIDOLoss{K: 1}, []float32{0}, 1, []int32{0}, nil, "at least 2"},
		{"K<2 categorical", CategoricalLoss{K: 0}, nil, 1, []int32{0}, nil, "at least 2"},
		{"bin >= K", DIDOLoss{K: 2}, []float32{0, 0}, 1, []int32{2}, nil, "bin 2 at element 0"},
		{"NaN logit", DIDOLoss{K: 2}, []float32{0, nan}, 1, []int32{0}, nil, "logit 1 is NaN"},
		{"logits/bins mismatch", CategoricalLoss{K: 2}, []float32{0, 0, 0}, 1, []int32{0}, nil, "want N*P*HW"},
		{"bins mismatch", DIDOLoss{K: 2}, []float32{0, 0}, 1, []int32{0, 1}, nil, "target has 2"},
		{"grad mismatch", DIDOLoss{K: 2}, []float32{0, 0}, 1, []int32{0}, make([]float32, 1), "gradient buffer"},
		{"empty batch", DIDOLoss{K: 2}, nil, 0, nil, nil, ""},
		{"all skipped", CategoricalLoss{K: 2}, []float32{0, 0}, 1, []int32{-1}, make([]float32, 2), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loss, _, err := tt.loss.Loss(tt.logits, tt.n, 1, tt.bins, tt.grad)
			if tt.wantErr == "" {
				if err != nil || loss != 0 {
					t.Fatalf("loss %v err %v, want 0 and no error", loss, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
	if err := (DIDOLoss{K: 2}).Epistemic([]float32{0, 0}, 1, 1, make([]float32, 2), nil); err == nil {
		t.Error("read-out with a wrong output length accepted")
	}
}

// TestDIDOStrengthEquilibrium: for an element whose bin has distribution p
// given its input, the expected DIDO loss sum_k p_k (psi(S) - psi(alpha_k))
// + lambda KL(Dir(alpha) || Dir(1)) has its stationary point at
// alpha = 1 + p/lambda, i.e. S* = K + 1/lambda whatever p. (dL/de_j =
// psi'(S)(1 - lambda(S - K)) - psi'(alpha_j)(p_j - lambda e_j), zero for
// e = p/lambda.) Consequence (docs/training.md): a converged AuxUE gives
// K/S = K/(K + 1/lambda) (0.242 for K = 32, lambda = 0.01) on every
// supervised pixel, predictable or not; only the evidence the network
// extrapolates to unsupervised inputs can set them apart.
func TestDIDOStrengthEquilibrium(t *testing.T) {
	const k = 32
	rng := rand.New(rand.NewPCG(5, 6))
	// gamma > 0 adds `unlabeled` elements (bin -1) with the same logits: the
	// pattern is labeled on a fraction f of its elements and the stationary
	// point moves to alpha = 1 + p/Lambda', Lambda' = lambda (f + (1-f) gamma) / f.
	for _, reg := range []struct {
		gamma     float64
		unlabeled int
	}{{0, 0}, {0, 20}, {0.1, 20}, {1, 5}} {
		for _, lambda := range []float64{0.1, 0.01, 0.001} {
			for _, spread := range []int{1, 3, 12, 32} {
				// p: `spread` bins with random integer counts; each element
				// carries the same logits and one bin, so the mean loss over the
				// elements is the expected loss under p.
				counts := make([]int, k)
				n := 0
				for _, c := range rng.Perm(k)[:spread] {
					counts[c] = 1 + rng.IntN(9)
					n += counts[c]
				}
				bins := make([]int32, 0, n+reg.unlabeled)
				for c, m := range counts {
					for range m {
						bins = append(bins, int32(c))
					}
				}
				for range reg.unlabeled {
					bins = append(bins, -1)
				}
				all := len(bins)
				f := float64(n) / float64(all)
				eff := lambda
				if reg.gamma > 0 {
					eff = lambda * (f + (1-f)*reg.gamma) / f
				}
				d := DIDOLoss{K: k, Lambda: lambda, UnlabeledWeight: reg.gamma}
				grad := make([]float32, k*all)
				gradAt := func(scale float64) []float64 {
					logits := make([]float32, k*all)
					for c, m := range counts {
						z := -40.0 // no evidence where p = 0
						if m > 0 {
							z = math.Log(scale * float64(m) / float64(n) / eff)
						}
						for j := 0; j < all; j++ {
							logits[c*all+j] = float32(z)
						}
					}
					if _, _, err := d.Loss(logits, 1, all, bins, grad); err != nil {
						t.Fatal(err)
					}
					g := make([]float64, k) // d(mean loss)/d(shared logit of bin c)
					for c := range g {
						for j := 0; j < all; j++ {
							g[c] += float64(grad[c*all+j])
						}
					}
					return g
				}
				maxAbs := func(g []float64) float64 {
					m := 0.0
					for _, v := range g {
						m = max(m, math.Abs(v))
					}
					return m
				}
				// At the stationary point the gradient vanishes up to float32
				// rounding of the logits; with twice the evidence it does not.
				at, off := maxAbs(gradAt(1)), maxAbs(gradAt(2))
				if at > 1e-6 || off < 100*at || off < 1e-4 {
					t.Errorf("gamma %g, %d unlabeled, lambda %g, %d bins: |grad| %.2g at alpha = 1 + p/lambda', %.2g at 1 + 2p/lambda'",
						reg.gamma, reg.unlabeled, lambda, spread, at, off)
				}
			}
		}
	}
}
