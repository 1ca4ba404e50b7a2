package auxue

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mathext"
)

// Activation maps a head's raw output to a positive parameter.
type Activation int

const (
	// ActExp is exp(min(r, MaxRaw)), with the lower side clamped at -MaxRaw
	// so that 1/b stays finite.
	ActExp Activation = iota
	// ActSoftplus is log(1 + exp(r)), floored at minSoftplus.
	ActSoftplus
)

// MaxRaw bounds |raw| before exp: exp(±30) spans 1e-13..1e13, far beyond any
// depth error scale, and keeps e/b and its square finite in float64.
const MaxRaw = 30

// minSoftplus keeps softplus outputs away from 0 (where log b diverges).
const minSoftplus = 1e-12

func (a Activation) String() string {
	switch a {
	case ActExp:
		return "exp"
	case ActSoftplus:
		return "softplus"
	}
	return fmt.Sprintf("Activation(%d)", int(a))
}

// apply returns the activated value p, log p and dp/dr (0 where clamped).
func (a Activation) apply(r float64) (p, logp, dp float64) {
	switch a {
	case ActSoftplus:
		p = math.Max(r, 0) + math.Log1p(math.Exp(-math.Abs(r)))
		if p < minSoftplus {
			return minSoftplus, math.Log(minSoftplus), 0
		}
		return p, math.Log(p), 1 / (1 + math.Exp(-r))
	default:
		switch {
		case r > MaxRaw:
			return math.Exp(MaxRaw), MaxRaw, 0
		case r < -MaxRaw:
			return math.Exp(-MaxRaw), -MaxRaw, 0
		}
		p = math.Exp(r)
		return p, r, p
	}
}

// AleatoricKind selects the noise distribution assumed by sigma_Theta1.
type AleatoricKind int

const (
	// Laplace: one parameter, the scale b; loss log(2b) + |e|/b (the paper's choice).
	Laplace AleatoricKind = iota
	// Gaussian: one parameter, the variance v; loss (1/2) log v + e^2/(2v) (paper eq. 2).
	Gaussian
	// GenGaussian: parameters (alpha, beta); loss (|e|/alpha)^beta - log(beta/alpha) + lnGamma(1/beta).
	GenGaussian
	// NIG: parameters (nu, alpha, beta) of a Normal-Inverse-Gamma prior, alpha > 1;
	// loss L1 + lambda_NIG L2 (supplementary B, Amini et al. 2020).
	NIG
)

func (k AleatoricKind) String() string {
	switch k {
	case Laplace:
		return "laplace"
	case Gaussian:
		return "gaussian"
	case GenGaussian:
		return "ggau"
	case NIG:
		return "nig"
	}
	return fmt.Sprintf("AleatoricKind(%d)", int(k))
}

// lossName is a constant per kind, so that the hot path does not build strings.
func (k AleatoricKind) lossName() string {
	switch k {
	case Gaussian:
		return "gaussian loss"
	case GenGaussian:
		return "ggau loss"
	case NIG:
		return "nig loss"
	}
	return "laplace loss"
}

// ParseAleatoricKind reads "laplace", "gaussian", "ggau" or "nig".
func ParseAleatoricKind(s string) (AleatoricKind, error) {
	for _, k := range []AleatoricKind{Laplace, Gaussian, GenGaussian, NIG} {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown aleatoric loss %q (want laplace, gaussian, ggau or nig)", s)
}

// NumParams is the number of raw outputs per element (the channel count P).
func (k AleatoricKind) NumParams() int {
	switch k {
	case GenGaussian:
		return 2
	case NIG:
		return 3
	}
	return 1
}

// DefaultLambdaNIG is the weight of the NIG evidence regularizer (supplementary B).
const DefaultLambdaNIG = 0.01

// AleatoricLoss is the NLL of sigma_Theta1 under one noise assumption.
//
// Raw channel p of element (n, j) is raw[(n*P+p)*HW + j]. The channels are:
// Laplace: b = act(r0). Gaussian: v = act(r0). GenGaussian: alpha = act(r0),
// beta = act(r1). NIG: nu = act(r0), alpha = 1 + act(r1), beta = act(r2).
type AleatoricLoss struct {
	Kind       AleatoricKind
	Activation Activation
	// LambdaNIG weighs L2 = |e| (2 nu + alpha) for NIG; 0 means DefaultLambdaNIG,
	// a negative value disables the regularizer.
	LambdaNIG float64
}

func (l AleatoricLoss) lambdaNIG() float64 {
	switch {
	case l.LambdaNIG == 0:
		return DefaultLambdaNIG
	case l.LambdaNIG < 0:
		return 0
	}
	return l.LambdaNIG
}

// checkLayout validates the (N, P, HW) layout shared by the losses.
func checkLayout(what string, raw []float32, n, p, hw, targets, valid, grad int) error {
	switch {
	case n < 0 || hw <= 0:
		return fmt.Errorf("%s: invalid layout N=%d HW=%d", what, n, hw)
	case len(raw) != n*p*hw:
		return fmt.Errorf("%s: raw output has %d values, want N*P*HW = %d*%d*%d = %d", what, len(raw), n, p, hw, n*p*hw)
	case targets != n*hw:
		return fmt.Errorf("%s: target has %d values, want N*HW = %d", what, targets, n*hw)
	case valid >= 0 && valid != n*hw:
		return fmt.Errorf("%s: valid mask has %d values, want N*HW = %d", what, valid, n*hw)
	case grad >= 0 && grad != len(raw):
		return fmt.Errorf("%s: gradient buffer has %d values, want %d", what, grad, len(raw))
	}
	return nil
}

func maskLen(valid []bool) int {
	if valid == nil {
		return -1
	}
	return len(valid)
}

func gradLen(grad []float32) int {
	if grad == nil {
		return -1
	}
	return len(grad)
}

// Loss returns the mean NLL over valid elements and the number of valid
// elements. errs holds the signed main-task errors y - f(x) (only |e| and e^2
// enter); valid may be nil (all valid). If grad is non-nil it receives
// d(mean loss)/d(raw) (0 at invalid elements). A non-finite error or raw
// value at a valid element is an error naming its index; no valid element
// gives loss 0 and a zero gradient.
func (l AleatoricLoss) Loss(raw []float32, n, hw int, errs []float32, valid []bool, grad []float32) (float64, int, error) {
	p := l.Kind.NumParams()
	if err := checkLayout(l.Kind.lossName(), raw, n, p, hw, len(errs), maskLen(valid), gradLen(grad)); err != nil {
		return 0, 0, err
	}
	count := 0
	for i, e := range errs {
		if valid != nil && !valid[i] {
			continue
		}
		if math.IsNaN(float64(e)) || math.IsInf(float64(e), 0) {
			return 0, 0, fmt.Errorf("%s loss: target error at element %d is %v", l.Kind, i, e)
		}
		count++
	}
	if grad != nil {
		clear(grad)
	}
	if count == 0 {
		return 0, 0, nil
	}
	inv := 1 / float64(count)
	lam := l.lambdaNIG()
	var total float64
	var g [3]float64
	var r [3]float64
	for b := 0; b < n; b++ {
		for j := 0; j < hw; j++ {
			i := b*hw + j
			if valid != nil && !valid[i] {
				continue
			}
			for c := 0; c < p; c++ {
				v := float64(raw[(b*p+c)*hw+j])
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return 0, 0, fmt.Errorf("%s loss: raw output channel %d at element %d is %v", l.Kind, c, i, v)
				}
				r[c] = v
			}
			total += l.element(r[:p], float64(errs[i]), lam, g[:p])
			if grad != nil {
				for c := 0; c < p; c++ {
					grad[(b*p+c)*hw+j] = float32(g[c] * inv)
				}
			}
		}
	}
	return total * inv, count, nil
}

// element returns the loss of one element and writes dloss/draw into g.
func (l AleatoricLoss) element(r []float64, e, lam float64, g []float64) float64 {
	act := l.Activation
	ae := math.Abs(e)
	switch l.Kind {
	case Gaussian:
		v, logv, dv := act.apply(r[0])
		g[0] = (0.5/v - e*e/(2*v*v)) * dv
		return 0.5*logv + e*e/(2*v)
	case GenGaussian:
		a, loga, da := act.apply(r[0])
		bt, logb, db := act.apply(r[1])
		// t = (|e|/a)^beta; t -> 0 with t log t -> 0 when e = 0.
		var t, logu float64
		if ae > 0 {
			logu = math.Log(ae) - loga
			t = math.Exp(bt * logu)
		}
		g[0] = (-bt*t/a + 1/a) * da
		g[1] = (t*logu - 1/bt - Digamma(1/bt)/(bt*bt)) * db
		return t - logb + loga + LogGamma(1/bt)
	case NIG:
		nu, lognu, dnu := act.apply(r[0])
		a1, _, da := act.apply(r[1])
		beta, _, dbeta := act.apply(r[2])
		alpha := 1 + a1
		omega := 2 * beta * (1 + nu)
		q := e*e*nu + omega
		logOmega, logq := math.Log(omega), math.Log(q)
		loss := 0.5*(math.Log(math.Pi)-lognu) - alpha*logOmega + (alpha+0.5)*logq +
			LogGamma(alpha) - LogGamma(alpha+0.5) + lam*ae*(2*nu+alpha)
		dLdnu := -0.5/nu - alpha*2*beta/omega + (alpha+0.5)*(e*e+2*beta)/q + lam*2*ae
		dLdalpha := -logOmega + logq + Digamma(alpha) - Digamma(alpha+0.5) + lam*ae
		dLdbeta := -alpha/beta + (alpha+0.5)*2*(1+nu)/q
		g[0], g[1], g[2] = dLdnu*dnu, dLdalpha*da, dLdbeta*dbeta
		return loss
	default: // Laplace
		b, logb, db := act.apply(r[0])
		g[0] = (1/b - ae/(b*b)) * db
		return math.Ln2 + logb + ae/b
	}
}

// Scale returns the aleatoric read-out of one element from its raw channels
// (len = NumParams): Laplace b, Gaussian standard deviation sqrt(v),
// GenGaussian the standard deviation alpha*sqrt(Gamma(3/beta)/Gamma(1/beta)),
// NIG the expected noise standard deviation sqrt(beta/(alpha-1)).
func (l AleatoricLoss) Scale(r []float32) float64 {
	act := l.Activation
	switch l.Kind {
	case Gaussian:
		v, _, _ := act.apply(float64(r[0]))
		return math.Sqrt(v)
	case GenGaussian:
		a, _, _ := act.apply(float64(r[0]))
		b, _, _ := act.apply(float64(r[1]))
		return a * math.Exp(0.5*(LogGamma(3/b)-LogGamma(1/b)))
	case NIG:
		a1, _, _ := act.apply(float64(r[1]))
		beta, _, _ := act.apply(float64(r[2]))
		return math.Sqrt(beta / a1)
	default:
		b, _, _ := act.apply(float64(r[0]))
		return b
	}
}

// HalfWidth returns w such that P(|e| <= w) = coverage under the predicted
// noise distribution (0 < coverage < 1): Laplace b ln(1/(1-coverage));
// Gaussian and NIG (through its expected variance) sigma * sqrt(2) erfinv(coverage);
// GenGaussian alpha * P^-1(1/beta, coverage)^(1/beta), P the regularized
// lower incomplete gamma function.
func (l AleatoricLoss) HalfWidth(r []float32, coverage float64) (float64, error) {
	if !(coverage > 0 && coverage < 1) {
		return 0, fmt.Errorf("interval coverage %v outside (0, 1)", coverage)
	}
	if len(r) != l.Kind.NumParams() {
		return 0, fmt.Errorf("%s half-width: %d raw channels, want %d", l.Kind, len(r), l.Kind.NumParams())
	}
	switch l.Kind {
	case Gaussian, NIG:
		return l.Scale(r) * math.Sqrt2 * math.Erfinv(coverage), nil
	case GenGaussian:
		a, _, _ := l.Activation.apply(float64(r[0]))
		b, _, _ := l.Activation.apply(float64(r[1]))
		return a * math.Pow(mathext.GammaIncRegInv(1/b, coverage), 1/b), nil
	default:
		return l.Scale(r) * math.Log(1/(1-coverage)), nil
	}
}
