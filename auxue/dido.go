package auxue

import (
	"fmt"
	"math"

	"github.com/didoedge/didoedge/pkg/nn"
	"github.com/didoedge/didoedge/pkg/simd/argmax"
	"github.com/didoedge/didoedge/pkg/simd/batchexp"
)

// DefaultLambdaDepth and DefaultKDepth are the paper's DIDO settings for
// monocular depth (supplementary D: K = 32, lambda = 0.01).
const (
	DefaultKDepth      = 32
	DefaultLambdaDepth = 0.01
)

// DIDOLoss is the Dirichlet loss of sigma_Theta2 (paper eq. 4) on logits z:
// evidence e_k = exp(min(z_k, MaxLogit)), alpha = e + 1, S = sum_k alpha_k,
//
//	L = psi(S) - psi(alpha_y) + Lambda * KL(Dir(alpha) || Dir(1)),
//	KL = lnGamma(S) - sum lnGamma(alpha_k) - lnGamma(K) + sum (alpha_k - 1)(psi(alpha_k) - psi(S)),
//
// averaged over the elements whose bin y is >= 0. With UnlabeledWeight
// gamma > 0 the elements without ground truth (bin < 0) add gamma * Lambda *
// KL to the sum (still divided by the labeled count): their one-hot target
// is all zeros, so of eq. 4 only the regularizer remains, which pulls alpha
// towards 1. A pattern labeled on a fraction f of its pixels then settles
// at alpha = 1 + f p / (Lambda (f + (1 - f) gamma)) instead of 1 + p/Lambda,
// and a pattern never labeled (the sky under a LiDAR) at alpha = 1, K/S = 1.
type DIDOLoss struct {
	K      int
	Lambda float64
	// MaxLogit clamps logits before exp (0 means nn.DefaultExpClamp, the bound
	// the exported network's Exp uses); clamped logits get no gradient.
	MaxLogit float64
	// UnlabeledWeight is gamma above; 0 skips the elements with bin < 0.
	UnlabeledWeight float64
}

func (d DIDOLoss) maxLogit() float64 {
	if d.MaxLogit == 0 {
		return nn.DefaultExpClamp
	}
	return d.MaxLogit
}

// evidence returns exp(min(z, max)) and its derivative (0 when clamped).
func evidence(z, maxLogit float64) (e, de float64) {
	if z >= maxLogit {
		return math.Exp(maxLogit), 0
	}
	e = math.Exp(z)
	return e, e
}

// checkBins validates the class targets (N, HW); negative bins are skipped.
func checkBins(what string, k int, logits []float32, n, hw int, bins []int32, grad []float32) error {
	if k < 2 {
		return fmt.Errorf("%s: K = %d, want at least 2 bins", what, k)
	}
	if err := checkLayout(what, logits, n, k, hw, len(bins), -1, gradLen(grad)); err != nil {
		return err
	}
	for i, b := range bins {
		if int(b) >= k {
			return fmt.Errorf("%s: bin %d at element %d, want < K = %d", what, b, i, k)
		}
	}
	for i, z := range logits {
		if math.IsNaN(float64(z)) || math.IsInf(float64(z), 0) {
			return fmt.Errorf("%s: logit %d is %v", what, i, z)
		}
	}
	return nil
}

// startClassLoss zeroes grad (when non-nil) and counts the elements in the
// loss (bin >= 0).
func startClassLoss(bins []int32, grad []float32) int {
	if grad != nil {
		clear(grad)
	}
	count := 0
	for _, b := range bins {
		if b >= 0 {
			count++
		}
	}
	return count
}

// Loss returns the mean DIDO loss over elements with bins[i] >= 0 and their
// count; with UnlabeledWeight > 0 the regularizer of the other elements is
// added before dividing by that count. logits is (N, K, HW), bins is (N, HW).
// If grad is non-nil it receives d(loss)/d(logits) (0 for skipped elements).
// No counted element gives loss 0 and a zero gradient.
func (d DIDOLoss) Loss(logits []float32, n, hw int, bins []int32, grad []float32) (float64, int, error) {
	if err := checkBins("DIDO loss", d.K, logits, n, hw, bins, grad); err != nil {
		return 0, 0, err
	}
	count := startClassLoss(bins, grad)
	if count == 0 {
		return 0, 0, nil
	}
	k, maxz, inv := d.K, d.maxLogit(), 1/float64(count)
	lnGammaK := LogGamma(float64(k))
	// Each element's evidences and their derivatives, computed once (the
	// sums below read them twice).
	ev, dev := make([]float64, k), make([]float64, k)
	var total float64
	for b := 0; b < n; b++ {
		base := b * k * hw
		for j := 0; j < hw; j++ {
			y := int(bins[b*hw+j])
			if y < 0 && d.UnlabeledWeight == 0 {
				continue
			}
			s := 0.0
			for c := 0; c < k; c++ {
				ev[c], dev[c] = evidence(float64(logits[base+c*hw+j]), maxz)
				s += ev[c] + 1
			}
			psiS, triS := digammaTrigamma(s)
			kl := LogGamma(s) - lnGammaK
			var loss float64
			for c := 0; c < k; c++ {
				e, de := ev[c], dev[c]
				a := e + 1
				var psiA, triA float64
				if grad != nil {
					psiA, triA = digammaTrigamma(a)
				} else {
					psiA = Digamma(a)
				}
				kl += -LogGamma(a) + e*(psiA-psiS)
				if c == y {
					loss = psiS - psiA
				}
				if grad != nil {
					if y < 0 {
						g := d.UnlabeledWeight * d.Lambda * (e*triA - (s-float64(k))*triS)
						grad[base+c*hw+j] = float32(g * de * inv)
						continue
					}
					g := triS + d.Lambda*(e*triA-(s-float64(k))*triS)
					if c == y {
						g -= triA
					}
					grad[base+c*hw+j] = float32(g * de * inv)
				}
			}
			if y < 0 {
				total += d.UnlabeledWeight * d.Lambda * kl
				continue
			}
			total += loss + d.Lambda*kl
		}
	}
	return total * inv, count, nil
}

// Epistemic writes the DIDO epistemic uncertainty K/S of each element of the
// (N, K, HW) logits into out (N*HW values, in (0, 1]). When bins is non-nil
// it also receives the argmax class (the rough aleatoric read-out: the
// first class of the largest logit).
//
// Elements go in blocks of epistemicBlock: for each class in order, the
// block's logits of that class (contiguous in the layout) are added to the
// block's sums by batchexp.AddExpPlusOne, whose exp is math.Exp's bit for bit,
// so each element's S adds the same terms in the same order as
// one-element-at-a-time code would (epistemicElements) and out is the
// same to the bit, four exps per instruction where the CPU allows. A block
// holding a NaN logit is redone element by element, which reports the
// first NaN in element order.
func (d DIDOLoss) Epistemic(logits []float32, n, hw int, out []float32, bins []int32) error {
	if d.K < 2 {
		return fmt.Errorf("DIDO read-out: K = %d, want at least 2 bins", d.K)
	}
	if err := checkLayout("DIDO read-out", logits, n, d.K, hw, len(out), -1, -1); err != nil {
		return err
	}
	if bins != nil && len(bins) != len(out) {
		return fmt.Errorf("DIDO read-out: bins buffer has %d values, want %d", len(bins), len(out))
	}
	k, maxz := d.K, d.maxLogit()
	if math.IsNaN(maxz) {
		// evidence never clamps against a NaN bound (z >= NaN is
		// false); min(z, +Inf) = z does the same.
		maxz = math.Inf(1)
	}
	var (
		sums [epistemicBlock]float64 // S of each element of the block
		best [epistemicBlock]float32 // largest logit so far
		arg  [epistemicBlock]int32   // its class
	)
	for b := 0; b < n; b++ {
		base := b * k * hw
		for j0 := 0; j0 < hw; j0 += epistemicBlock {
			m := min(epistemicBlock, hw-j0)
			s, top, cls := sums[:m], best[:m], arg[:m]
			clear(s)
			copy(top, logits[base+j0:base+j0+m])
			clear(cls)
			for c := 0; c < k; c++ {
				row := logits[base+c*hw+j0 : base+c*hw+j0+m]
				batchexp.AddExpPlusOne(s, row, maxz)
				argmax.UpdateArgmax(top, cls, row, int32(c)) // strict >: the first class of the maximum
			}
			// exp(min(z, maxz)) is NaN only for a NaN z, and sums of
			// terms in [1, +Inf] are never NaN otherwise.
			if hasNaN(s) {
				if err := d.epistemicElements(logits, b, hw, j0, j0+m, maxz, out, bins); err != nil {
					return err
				}
				continue
			}
			o := out[b*hw+j0 : b*hw+j0+m]
			for j := range o {
				o[j] = float32(float64(k) / s[j])
			}
			if bins != nil {
				copy(bins[b*hw+j0:b*hw+j0+m], cls)
			}
		}
	}
	return nil
}

// hasNaN reports whether xs holds a NaN.
func hasNaN(xs []float64) bool {
	for _, x := range xs {
		if x != x {
			return true
		}
	}
	return false
}

// epistemicBlock is the number of elements Epistemic reads out together:
// their sums, maxima and classes live on the stack (4 KiB), and each
// class's stretch of logits is long enough for the vector kernel.
const epistemicBlock = 256

// epistemicElements is Epistemic element by element for elements j0..j1-1
// of image b: for each element, classes 0..K-1 in order, S += e+1 and the
// argmax (strict >, from -Inf); a NaN logit is an error naming its class
// and element.
func (d DIDOLoss) epistemicElements(logits []float32, b, hw, j0, j1 int, maxz float64, out []float32, bins []int32) error {
	base := b * d.K * hw
	for j := j0; j < j1; j++ {
		s, best, arg := 0.0, math.Inf(-1), int32(0)
		for c := 0; c < d.K; c++ {
			z := float64(logits[base+c*hw+j])
			if math.IsNaN(z) {
				return fmt.Errorf("DIDO read-out: logit of class %d at element %d is NaN", c, b*hw+j)
			}
			e, _ := evidence(z, maxz)
			s += e + 1
			if z > best {
				best, arg = z, int32(c)
			}
		}
		out[b*hw+j] = float32(float64(d.K) / s)
		if bins != nil {
			bins[b*hw+j] = arg
		}
	}
	return nil
}

// CategoricalLoss is the ablation baseline of supplementary D: softmax over
// the same K bins and cross-entropy, with the Shannon entropy as uncertainty.
type CategoricalLoss struct{ K int }

// Loss returns the mean cross-entropy over elements with bins[i] >= 0 and
// their count; grad (optional) receives d(mean loss)/d(logits) = (p - onehot)/count.
func (c CategoricalLoss) Loss(logits []float32, n, hw int, bins []int32, grad []float32) (float64, int, error) {
	if err := checkBins("categorical loss", c.K, logits, n, hw, bins, grad); err != nil {
		return 0, 0, err
	}
	count := startClassLoss(bins, grad)
	if count == 0 {
		return 0, 0, nil
	}
	inv := 1 / float64(count)
	var total float64
	for b := 0; b < n; b++ {
		base := b * c.K * hw
		for j := 0; j < hw; j++ {
			y := int(bins[b*hw+j])
			if y < 0 {
				continue
			}
			m, lse := logSumExp(logits, base+j, hw, c.K)
			total += lse - (float64(logits[base+y*hw+j]) - m)
			if grad != nil {
				for k := 0; k < c.K; k++ {
					p := math.Exp(float64(logits[base+k*hw+j]) - m - lse)
					if k == y {
						p--
					}
					grad[base+k*hw+j] = float32(p * inv)
				}
			}
		}
	}
	return total * inv, count, nil
}

// logSumExp returns the max m and log sum exp(z - m) over K strided logits.
func logSumExp(z []float32, at, stride, k int) (m, lse float64) {
	m = math.Inf(-1)
	for c := 0; c < k; c++ {
		m = math.Max(m, float64(z[at+c*stride]))
	}
	var s float64
	for c := 0; c < k; c++ {
		s += math.Exp(float64(z[at+c*stride]) - m)
	}
	return m, math.Log(s)
}

// Entropy writes the Shannon entropy (nats) of softmax(logits) per element.
func (c CategoricalLoss) Entropy(logits []float32, n, hw int, out []float32) error {
	if c.K < 2 {
		return fmt.Errorf("categorical read-out: K = %d, want at least 2 bins", c.K)
	}
	if err := checkLayout("categorical read-out", logits, n, c.K, hw, len(out), -1, -1); err != nil {
		return err
	}
	for b := 0; b < n; b++ {
		base := b * c.K * hw
		for j := 0; j < hw; j++ {
			m, lse := logSumExp(logits, base+j, hw, c.K)
			var h float64
			for k := 0; k < c.K; k++ {
				lp := float64(logits[base+k*hw+j]) - m - lse
				h -= math.Exp(lp) * lp
			}
			out[b*hw+j] = float32(h)
		}
	}
	return nil
}
