package corrupt

import "math"

// Per-severity parameters (imagecorruptions; iso and dark from 3D Common
// Corruptions, Kar et al. 2022).
var (
	gaussianSigma = [5]float64{.08, .12, .18, .26, .38}
	shotRate      = [5]float64{60, 25, 12, 5, 3}
	impulseAmount = [5]float64{.03, .06, .09, .17, .27}
	// iso_noise: Poisson photon noise at a fixed rate, then Gaussian read
	// noise at 0.7x the gaussian_noise sigmas.
	isoRate       = 25.0
	isoSigmaScale = 0.7
	// dark: the value range is remapped to [0, c] with gamma 2, then
	// Poisson (10x the shot_noise rate) and Gaussian (0.1x the
	// gaussian_noise sigma) noise of the same severity index.
	darkTop = [5]float64{.6, .5, .4, .3, .2}
)

// gaussianNoise: x + N(0, sigma^2) per channel.
func (c *Corruptor) gaussianNoise(dst, src []uint8, w, h, s int) {
	c.addGaussian(dst, src, gaussianSigma[s])
}

func (c *Corruptor) addGaussian(dst, src []uint8, sigma float64) {
	sg := float32(sigma)
	for i, v := range src {
		dst[i] = clipByte(float32(v)*(1.0/255) + sg*float32(c.rng.NormFloat64()))
	}
}

// shotNoise: Poisson(x*c)/c per channel.
func (c *Corruptor) shotNoise(dst, src []uint8, w, h, s int) {
	c.addPoisson(dst, src, shotRate[s])
}

func (c *Corruptor) addPoisson(dst, src []uint8, rate float64) {
	t := c.poissonTableFor(rate)
	inv := float32(1 / rate)
	for i, v := range src {
		dst[i] = clipByte(float32(t.sample(v, c.rng.Float64())) * inv)
	}
}

// impulseNoise: salt and pepper on a fraction `amount` of the channel
// values, half salt, half pepper (skimage random_noise mode "s&p").
func (c *Corruptor) impulseNoise(dst, src []uint8, w, h, s int) {
	amount := impulseAmount[s]
	for i, v := range src {
		u := c.rng.Float64()
		switch {
		case u >= amount:
			dst[i] = v
		case c.rng.Uint64()&1 == 1:
			dst[i] = 255
		default:
			dst[i] = 0
		}
	}
}

// isoNoise: Poisson(x*25)/25 followed by Gaussian noise 0.7*sigma_s.
func (c *Corruptor) isoNoise(dst, src []uint8, w, h, s int) {
	c.addPoisson(dst, src, isoRate)
	c.addGaussian(dst, dst, isoSigmaScale*gaussianSigma[s])
}

// dark (low light): y = ((x-min)/(max-min))^2 * c_s over the whole image,
// stored as 8-bit, then Poisson noise at rate 10*shotRate[s] and Gaussian
// noise with sigma 0.1*gaussianSigma[s]. A constant image is not stretched.
func (c *Corruptor) dark(dst, src []uint8, w, h, s int) {
	lo, hi := uint8(255), uint8(0)
	for _, v := range src {
		lo, hi = min(lo, v), max(hi, v)
	}
	top := darkTop[s]
	var lut [256]uint8
	for v := range 256 {
		t := float64(v) / 255
		if hi > lo {
			t = math.Max(0, float64(v)-float64(lo)) / float64(hi-lo)
		}
		lut[v] = uint8(math.Round(t * t * top * 255))
	}
	for i, v := range src {
		dst[i] = lut[v]
	}
	c.addPoisson(dst, dst, 10*shotRate[s])
	c.addGaussian(dst, dst, 0.1*gaussianSigma[s])
}

// poissonGuides is the number of guide entries per level: guide[g] is the
// first k with CDF(k) > g/poissonGuides, where inversion search starts.
const poissonGuides = 64

// poissonTable holds, for each 8-bit level v, the CDF of Poisson(v/255*rate)
// so that sampling is one uniform draw, a guide-table jump and a short scan.
type poissonTable struct {
	off   [257]int32
	cdf   []float64
	guide [256][poissonGuides]int32
}

func (c *Corruptor) poissonTableFor(rate float64) *poissonTable {
	if t, ok := c.poisson[rate]; ok {
		return t
	}
	if c.poisson == nil {
		c.poisson = make(map[float64]*poissonTable)
	}
	t := newPoissonTable(rate)
	c.poisson[rate] = t
	return t
}

func newPoissonTable(rate float64) *poissonTable {
	t := &poissonTable{}
	for v := range 256 {
		t.off[v] = int32(len(t.cdf))
		lam := float64(v) / 255 * rate
		kmax := int(lam + 12*math.Sqrt(lam) + 20)
		// Work in log space for the first term: exp(-lam) underflows
		// only beyond lam ~ 745, far above the largest rate used here.
		p := math.Exp(-lam)
		sum := p
		t.cdf = append(t.cdf, sum)
		for k := 1; k <= kmax && sum < 1-1e-15; k++ {
			p *= lam / float64(k)
			sum += p
			t.cdf = append(t.cdf, sum)
		}
	}
	t.off[256] = int32(len(t.cdf))
	for v := range 256 {
		cdf := t.cdf[t.off[v]:t.off[v+1]]
		k := 0
		for g := range poissonGuides {
			for k < len(cdf)-1 && cdf[k] <= float64(g)/poissonGuides {
				k++
			}
			t.guide[v][g] = int32(k)
		}
	}
	return t
}

// sample returns the smallest k with CDF(k) > u (u in [0,1)) for level v,
// or the last tabulated k when u lies in the (< 1e-15) tail.
func (t *poissonTable) sample(v uint8, u float64) int {
	cdf := t.cdf[t.off[v]:t.off[int(v)+1]]
	k := int(t.guide[v][int(u*poissonGuides)])
	for k < len(cdf)-1 && cdf[k] <= u {
		k++
	}
	return k
}
