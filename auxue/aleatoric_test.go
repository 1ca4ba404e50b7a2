package auxue

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/pkg/nn/gradcheck"
)

// randomHead returns raw outputs, signed errors and a mask with one invalid
// element for an (N=2, P, HW=3) layout.
func randomHead(rng *rand.Rand, p int) (raw, errs []float32, valid []bool) {
	const n, hw = 2, 3
	raw = make([]float32, n*p*hw)
	for i := range raw {
		raw[i] = float32(rng.Float64()*2 - 1)
	}
	errs = make([]float32, n*hw)
	for i := range errs {
		errs[i] = float32(rng.NormFloat64() * 1.5)
	}
	errs[1] = 0 // exercise |e| = 0
	valid = []bool{true, true, true, false, true, true}
	return raw, errs, valid
}

func TestAleatoricGradients(t *testing.T) {
	for _, kind := range []AleatoricKind{Laplace, Gaussian, GenGaussian, NIG} {
		for _, act := range []Activation{ActExp, ActSoftplus} {
			t.Run(kind.String()+"/"+act.String(), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(1, uint64(kind)*7+uint64(act)))
				raw, errs, valid := randomHead(rng, kind.NumParams())
				if kind == GenGaussian {
					errs[1] = 0.01 // (|e|/alpha)^beta is not differentiable in beta at e = 0 from both sides
				}
				l := AleatoricLoss{Kind: kind, Activation: act}
				grad := make([]float32, len(raw))
				loss, count, err := l.Loss(raw, 2, 3, errs, valid, grad)
				if err != nil {
					t.Fatal(err)
				}
				if count != 5 || math.IsNaN(loss) {
					t.Fatalf("count %d loss %v", count, loss)
				}
				num := gradcheck.NumericGrad(func() float64 {
					v, _, err := l.Loss(raw, 2, 3, errs, valid, nil)
					if err != nil {
						t.Fatal(err)
					}
					return v
				}, raw, 1e-3)
				if err := gradcheck.Check(grad, num, gradcheck.Tolerance{Rel: 2e-3, Abs: 2e-5}); err != nil {
					t.Error(err)
				}
				// The invalid element (index 3 = image 1, pixel 0) gets no gradient.
				for c := 0; c < kind.NumParams(); c++ {
					if g := grad[(1*kind.NumParams()+c)*3+0]; g != 0 {
						t.Errorf("invalid element has gradient %v in channel %d", g, c)
					}
				}
			})
		}
	}
}

func TestAleatoricClosedForms(t *testing.T) {
	lnr := func(x float64) float32 { return float32(math.Log(x)) }
	tests := []struct {
		name string
		loss AleatoricLoss
		raw  []float32
		e    float32
		want float64
	}{
		{"laplace b=1 e=1", AleatoricLoss{Kind: Laplace}, []float32{0}, 1, math.Ln2 + 1},
		{"laplace b=2 e=-3", AleatoricLoss{Kind: Laplace}, []float32{lnr(2)}, -3, math.Log(4) + 1.5},
		{"gaussian v=4 e=2", AleatoricLoss{Kind: Gaussian}, []float32{lnr(4)}, 2, 0.5*math.Log(4) + 0.5},
		// beta = 1: Laplace without the log 2 (lnGamma(1) = 0).
		{"ggau a=2 b=1 e=3", AleatoricLoss{Kind: GenGaussian}, []float32{lnr(2), 0}, 3, 1.5 + math.Log(2)},
		// beta = 2: (e/a)^2 - log(2/a) + lnGamma(1/2).
		{"ggau a=1 b=2 e=0.5", AleatoricLoss{Kind: GenGaussian}, []float32{0, lnr(2)}, 0.5, 0.25 - math.Log(2) + 0.5*math.Log(math.Pi)},
		// NIG nu=1 alpha=2 beta=0.5 (Omega = 2): 0.5 ln pi - 2 ln 2 + 2.5 ln(e^2 + 2) + ln(G(2)/G(2.5)) + 0.01*|e|*4.
		{"nig e=1", AleatoricLoss{Kind: NIG}, []float32{0, 0, lnr(0.5)}, 1,
			0.5*math.Log(math.Pi) - 2*math.Log(2) + 2.5*math.Log(3) - LogGamma(2.5) + 0.04},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, n, err := tt.loss.Loss(tt.raw, 1, 1, []float32{tt.e}, nil, nil)
			if err != nil || n != 1 {
				t.Fatalf("n=%d err=%v", n, err)
			}
			if math.Abs(got-tt.want) > 1e-6 {
				t.Errorf("loss = %.9g, want %.9g", got, tt.want)
			}
		})
	}
}

// The NLL minimum sits where theory puts it: Laplace b = |e|, Gaussian v = e^2.
func TestAleatoricMinimum(t *testing.T) {
	grad := make([]float32, 1)
	for _, tc := range []struct {
		kind AleatoricKind
		raw  float64
	}{{Laplace, math.Log(2.5)}, {Gaussian, math.Log(2.5 * 2.5)}} {
		if _, _, err := (AleatoricLoss{Kind: tc.kind}).Loss([]float32{float32(tc.raw)}, 1, 1, []float32{-2.5}, nil, grad); err != nil {
			t.Fatal(err)
		}
		if math.Abs(float64(grad[0])) > 1e-6 {
			t.Errorf("%s: gradient at the optimum = %v", tc.kind, grad[0])
		}
	}
}

func TestHalfWidthCoverage(t *testing.T) {
	const cov = 0.9
	b := 1.7
	lap := AleatoricLoss{Kind: Laplace}
	w, err := lap.HalfWidth([]float32{float32(math.Log(b))}, cov)
	if err != nil {
		t.Fatal(err)
	}
	// Laplace: P(|e| <= w) = 1 - exp(-w/b).
	if got := 1 - math.Exp(-w/b); math.Abs(got-cov) > 1e-6 {
		t.Errorf("laplace coverage %v", got)
	}
	if math.Abs(w-b*math.Log(10)) > 1e-5 {
		t.Errorf("laplace half-width %v, want b ln 10", w)
	}
	g := AleatoricLoss{Kind: Gaussian}
	w, _ = g.HalfWidth([]float32{float32(math.Log(4))}, cov) // sigma = 2
	if got := math.Erf(w / (2 * math.Sqrt2)); math.Abs(got-cov) > 1e-6 {
		t.Errorf("gaussian coverage %v", got)
	}
	// Generalized Gaussian with beta = 1 is Laplace with b = alpha.
	gg := AleatoricLoss{Kind: GenGaussian}
	w, _ = gg.HalfWidth([]float32{float32(math.Log(b)), 0}, cov)
	if math.Abs(w-b*math.Log(10)) > 1e-5 {
		t.Errorf("ggau(beta=1) half-width %v, want %v", w, b*math.Log(10))
	}
	for _, bad := range []float64{0, 1, -0.1, math.NaN()} {
		if _, err := lap.HalfWidth([]float32{0}, bad); err == nil {
			t.Errorf("coverage %v accepted", bad)
		}
	}
}

func TestAleatoricBadInput(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tests := []struct {
		name    string
		kind    AleatoricKind
		raw     []float32
		errs    []float32
		valid   []bool
		grad    []float32
		wantErr string
	}{
		{"NaN target", Laplace, []float32{0, 0}, []float32{1, nan}, nil, nil, "element 1 is NaN"},
		{"Inf target", Laplace, []float32{0, 0}, []float32{inf, 1}, nil, nil, "element 0 is +Inf"},
		{"NaN target masked out", Laplace, []float32{0, 0}, []float32{1, nan}, []bool{true, false}, nil, ""},
		{"NaN raw", Gaussian, []float32{nan, 0}, []float32{1, 1}, nil, nil, "channel 0 at element 0 is NaN"},
		{"raw too short", NIG, []float32{0, 0}, []float32{1, 1}, nil, nil, "want N*P*HW"},
		{"mask wrong length", Laplace, []float32{0, 0}, []float32{1, 1}, []bool{true}, nil, "valid mask has 1"},
		{"grad wrong length", Laplace, []float32{0, 0}, []float32{1, 1}, nil, make([]float32, 3), "gradient buffer"},
		{"empty batch", Laplace, nil, nil, nil, nil, ""},
		{"no valid element", Laplace, []float32{0, 0}, []float32{1, 1}, []bool{false, false}, make([]float32, 2), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := len(tt.errs)
			loss, _, err := AleatoricLoss{Kind: tt.kind}.Loss(tt.raw, n, 1, tt.errs, tt.valid, tt.grad)
			if tt.wantErr == "" {
				if err != nil || math.IsNaN(loss) {
					t.Fatalf("loss %v err %v", loss, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}
