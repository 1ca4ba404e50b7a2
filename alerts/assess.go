package alerts

import (
	"fmt"
	"math"
)

// Maps are the per-pixel outputs of one frame, row-major, Width*Height each.
type Maps struct {
	Width, Height int
	// Epistemic is the DIDO epistemic uncertainty K/S, in (0,1].
	Epistemic []float32
	// Scale is the Laplace scale b of the depth error, in metres.
	Scale []float32
	// Depth is the predicted depth, in metres.
	Depth []float32
	// Confidence is the depth model's own confidence read into an
	// uncertainty u (larger is less trustworthy, NaN where there is
	// none); nil when the model has no confidence output.
	Confidence []float32
}

// ZoneRisk are the metrics of one zone in one frame. Fractions are over
// the zone's valid pixels: finite depth > 0, finite K/S, finite b >= 0.
type ZoneRisk struct {
	Zone string
	// Pixels is the size of the zone's raster; Valid how many were valid.
	Pixels, Valid int
	// OODFraction is the fraction of valid pixels with K/S > tau_e.
	OODFraction float32
	// EpistemicP95 is the 95th percentile (nearest rank) of K/S.
	EpistemicP95 float32
	// AleatoricFraction is the fraction of valid pixels with b'/depth > tau_a
	// (the zone's), where b' = scale_correction * b.
	AleatoricFraction float32
	// NearestDepth is the smallest depth, in metres.
	NearestDepth float32
	// PessimisticDepth is the smallest lower end of the Laplace interval at
	// the calibrated coverage: max(0, depth - b' ln(1/(1-coverage))).
	PessimisticDepth float32
	// ConfidenceValid is how many of the zone's pixels had a finite
	// confidence read-out (0 without a confidence map), and
	// ConfidenceFraction the fraction of those with u > tau_c (the zone's).
	ConfidenceValid    int
	ConfidenceFraction float32
}

// HasDepth reports whether the zone had a valid pixel.
func (r ZoneRisk) HasDepth() bool { return r.Valid > 0 }

// Assessor computes ZoneRisk for every zone of every frame. It rasterizes
// the zones once per map size and reuses its buffers, so that Assess does
// not allocate. An Assessor is not safe for concurrent use.
type Assessor struct {
	zones  []Zone
	ignore []Zone
	tauE   []float32
	tauA   []float32
	tauC   []float32
	corr   float32
	// lnCov is ln(1/(1-coverage)): the half-width of the central Laplace
	// interval at that coverage is b*lnCov, since P(|X-mu| <= t) = 1-exp(-t/b).
	lnCov float32

	width, height int
	spans         [][]span // per zone: runs of contiguous pixel indices
	scratch       []float32
	hist          [histBins]uint32
	out           []ZoneRisk
	acc           spanAcc
	lohi          binLoHi
	hists         [histWays][histBins]uint32
	// kernel: the pixel loop runs eight pixels at a time in spanStats
	// (haveSpanKernel; tests turn it off to compare with the Go loop).
	kernel bool
}

// spanParams are a zone's thresholds as spanStats reads them, and the
// histogram's scale and last bin in eight lanes (the assembly reads the
// fields at offsets 0, 4, 8, 12, 16 and 48).
type spanParams struct {
	corr, tauE, tauA, lnCov float32
	binScale, binMax        [8]float32
}

// histWays is the number of histogram copies the pixel loop counts into
// (added up per zone).
const histWays = 4

// binLoHi are binKeep's eight lanes of minima and maxima, and the
// values they start from (offsets 0, 32, 64 and 96).
type binLoHi struct {
	lo, hi, plusMax, minusMax [8]float32
}

// histBin is the histogram bin of a finite value: floor(e*histBins)
// clamped to [0, histBins-1], clamped as a float before the conversion
// (a float beyond the int range has no defined conversion: on amd64 it
// gave bin 0 to a K/S above 2^53, out of order).
func histBin(e float32) int {
	return int(min(max(e*histBins, 0), histBins-1))
}

// spanAcc are spanStats' eight lanes of counts and minima (offsets 0, 32,
// 64 and 96), added up by the zone's loop.
type spanAcc struct {
	ood, alea     [8]int32
	nearest, pess [8]float32
	bins          [8]int32 // the kernel's scratch
}

// span is a run [start, end) of row-major pixel indices. Zones are stored
// as runs rather than index lists so that the per-frame loop reads
// contiguous memory.
type span struct{ start, end int32 }

// histBins is the resolution of the histogram that narrows the search for
// the 95th percentile to one bin before an exact selection inside it.
const histBins = 1024

// toSpans compresses a sorted index list into runs.
func toSpans(idx []int32) []span {
	var out []span
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && idx[j] == idx[j-1]+1 {
			j++
		}
		out = append(out, span{idx[i], idx[j-1] + 1})
		i = j
	}
	return out
}

// NewAssessor validates cal and prepares an assessor for the zones.
func NewAssessor(zones, ignore []Zone, cal Calibration) (*Assessor, error) {
	if err := cal.Validate(); err != nil {
		return nil, fmt.Errorf("new assessor: calibration: %w", err)
	}
	if len(zones) == 0 {
		return nil, fmt.Errorf("new assessor: no zones")
	}
	a := &Assessor{
		zones:  zones,
		ignore: ignore,
		tauE:   make([]float32, len(zones)),
		tauA:   make([]float32, len(zones)),
		tauC:   make([]float32, len(zones)),
		corr:   float32(cal.ScaleCorrection),
		lnCov:  float32(math.Log(1 / (1 - cal.Coverage))),
		out:    make([]ZoneRisk, len(zones)),
		kernel: haveSpanKernel,
	}
	for i, z := range zones {
		a.tauE[i] = float32(cal.tauEFor(z.Name))
		a.tauA[i] = float32(cal.TauAFor(z.Name))
		a.tauC[i] = float32(cal.TauCFor(z.Name))
		a.out[i].Zone = z.Name
	}
	return a, nil
}

// Zones returns the zones in assessment order.
func (a *Assessor) Zones() []Zone { return a.zones }

// prepare rasterizes the zones when the map size changes.
func (a *Assessor) prepare(w, h int) error {
	if w == a.width && h == a.height && a.spans != nil {
		return nil
	}
	r, err := Rasterize(a.zones, a.ignore, w, h)
	if err != nil {
		return err
	}
	largest := 0
	a.spans = make([][]span, len(r))
	for i, idx := range r {
		largest = max(largest, len(idx))
		a.out[i].Pixels = len(idx)
		a.spans[i] = toSpans(idx)
	}
	a.width, a.height = w, h
	a.scratch = make([]float32, largest)
	return nil
}

// Assess computes the metrics of every zone. The returned slice is owned
// by the Assessor and overwritten by the next call.
func (a *Assessor) Assess(m Maps) ([]ZoneRisk, error) {
	n := m.Width * m.Height
	if m.Width <= 0 || m.Height <= 0 {
		return nil, fmt.Errorf("assess: bad map size %dx%d", m.Width, m.Height)
	}
	if len(m.Epistemic) != n || len(m.Scale) != n || len(m.Depth) != n {
		return nil, fmt.Errorf("assess: map lengths epistemic %d, scale %d, depth %d, want %d (%dx%d)",
			len(m.Epistemic), len(m.Scale), len(m.Depth), n, m.Width, m.Height)
	}
	if m.Confidence != nil && len(m.Confidence) != n {
		return nil, fmt.Errorf("assess: confidence map of %d values, want %d (%dx%d)", len(m.Confidence), n, m.Width, m.Height)
	}
	if err := a.prepare(m.Width, m.Height); err != nil {
		return nil, fmt.Errorf("assess: %w", err)
	}
	a.assessConfidence(m.Confidence)
	for zi, spans := range a.spans {
		tauE, tauA, corr, lnCov := a.tauE[zi], a.tauA[zi], a.corr, a.lnCov
		buf := a.scratch
		hist, hists := &a.hist, &a.hists
		clear(hists[:])
		n, ood, alea := 0, 0, 0
		nearest, pess := float32(math.MaxFloat32), float32(math.MaxFloat32)
		acc := &a.acc
		*acc = spanAcc{}
		for l := range acc.nearest {
			acc.nearest[l], acc.pess[l] = math.MaxFloat32, math.MaxFloat32
		}
		params := spanParams{corr: corr, tauE: tauE, tauA: tauA, lnCov: lnCov}
		for l := range params.binScale {
			params.binScale[l], params.binMax[l] = histBins, histBins-1
		}
		for _, sp := range spans {
			epi := m.Epistemic[sp.start:sp.end]
			depth := m.Depth[sp.start:sp.end]
			depth = depth[:len(epi)]
			scale := m.Scale[sp.start:sp.end]
			scale = scale[:len(epi)]
			for j := 0; j < len(epi); {
				// Eight pixels at a time where the CPU can (AVX2), up to
				// a block that holds an invalid pixel; that block and the
				// span's last pixels go through the Go loop below. Both
				// compute the same float32 operations.
				if a.kernel && len(epi)-j >= 8 {
					k := spanStats(&epi[j], &depth[j], &scale[j], &buf[n], (len(epi)-j)&^7, &params, acc, hists)
					j += k
					n += k
				}
				for end := min(j+8, len(epi)); j < end; j++ {
					e, d, b := epi[j], depth[j], scale[j]*corr
					// x*0 is 0 for finite x and NaN for NaN or Inf, and every
					// comparison with NaN is false: one test covers all three.
					if !(d*0+e*0+b*0 == 0 && d > 0 && b >= 0) {
						continue
					}
					buf[n] = e
					n++
					hists[0][histBin(e)]++
					// Written as conditional moves: the branches are unpredictable.
					o, al := 0, 0
					if e > tauE {
						o = 1
					}
					if b > tauA*d {
						al = 1
					}
					ood += o
					alea += al
					nearest = min(nearest, d)
					pess = min(pess, d-b*lnCov)
				}
			}
		}
		for l := range acc.ood {
			ood += int(acc.ood[l])
			alea += int(acc.alea[l])
			nearest = min(nearest, acc.nearest[l])
			pess = min(pess, acc.pess[l])
		}
		for b := range hist {
			hist[b] = hists[0][b] + hists[1][b] + hists[2][b] + hists[3][b]
		}
		r := &a.out[zi]
		r.Valid = n
		if n == 0 {
			r.OODFraction, r.AleatoricFraction, r.EpistemicP95 = 0, 0, 0
			r.NearestDepth, r.PessimisticDepth = 0, 0
			continue
		}
		inv := 1 / float32(n)
		r.OODFraction = float32(ood) * inv
		r.AleatoricFraction = float32(alea) * inv
		r.NearestDepth = nearest
		r.PessimisticDepth = max(pess, 0)
		r.EpistemicP95 = percentileHist(buf[:n], hist, 0.95, a.kernel, &a.lohi)
	}
	return a.out, nil
}

// assessConfidence sets every zone's ConfidenceValid and
// ConfidenceFraction: over the zone's pixels with a finite u, the share
// with u > tau_c. A nil map gives 0 and 0.
func (a *Assessor) assessConfidence(conf []float32) {
	for zi, spans := range a.spans {
		r := &a.out[zi]
		r.ConfidenceValid, r.ConfidenceFraction = 0, 0
		if conf == nil {
			continue
		}
		tau := a.tauC[zi]
		n, above := 0, 0
		for _, sp := range spans {
			for _, u := range conf[sp.start:sp.end] {
				if u*0 != 0 { // NaN or Inf: no confidence here
					continue
				}
				n++
				if u > tau {
					above++
				}
			}
		}
		r.ConfidenceValid = n
		if n > 0 {
			r.ConfidenceFraction = float32(above) / float32(n)
		}
	}
}

// percentileHist returns the q-quantile of v by the nearest-rank rule (the
// ceil(q*n)-th smallest value), exactly: the histogram of v (histBin)
// finds the bin holding that rank, and an nth-element selection among the
// values of that bin finishes. With kernel the values of the bin are
// gathered eight at a time (binKeep). v is reordered; nothing is
// allocated.
func percentileHist(v []float32, hist *[histBins]uint32, q float64, kernel bool, lohi *binLoHi) float32 {
	k := int(math.Ceil(q*float64(len(v)))) - 1
	k = min(max(k, 0), len(v)-1)
	below, bin := 0, 0
	for ; bin < histBins-1; bin++ {
		if below+int(hist[bin]) > k {
			break
		}
		below += int(hist[bin])
	}
	// histBin(e) == bin exactly when from <= e < to: scaling by histBins
	// (a power of two) is exact, so the bin's edges are exact.
	from, to := float32(bin)/histBins, float32(bin+1)/histBins
	if bin == 0 {
		from = float32(math.Inf(-1))
	}
	if bin == histBins-1 {
		to = float32(math.Inf(1))
	}
	m, start := 0, 0
	lo, hi := float32(math.MaxFloat32), float32(-math.MaxFloat32)
	if kernel && len(v) >= 8 {
		for l := range lohi.lo {
			lohi.lo[l], lohi.hi[l] = math.MaxFloat32, -math.MaxFloat32
			lohi.plusMax[l], lohi.minusMax[l] = math.MaxFloat32, -math.MaxFloat32
		}
		start = len(v) &^ 7
		m = binKeep(&v[0], start, from, to, lohi)
		for l := range lohi.lo {
			lo, hi = min(lo, lohi.lo[l]), max(hi, lohi.hi[l])
		}
	}
	for _, e := range v[start:] {
		if from <= e && e < to {
			v[m] = e
			m++
			lo, hi = min(lo, e), max(hi, e)
		}
	}
	if lo == hi { // quantized maps: the whole bin is one value
		return lo
	}
	return nthElement(v[:m], k-below)
}

// nthElement returns the k-th smallest value of v (0-based), partially
// reordering v: Hoare partitioning around a median of three, which handles
// runs of equal values (common in saturated K/S maps) without degrading.
func nthElement(v []float32, k int) float32 {
	lo, hi := 0, len(v)-1
	for hi > lo {
		mid := lo + (hi-lo)/2
		if v[mid] < v[lo] {
			v[mid], v[lo] = v[lo], v[mid]
		}
		if v[hi] < v[lo] {
			v[hi], v[lo] = v[lo], v[hi]
		}
		if v[hi] < v[mid] {
			v[hi], v[mid] = v[mid], v[hi]
		}
		pivot := v[mid]
		i, j := lo, hi
		for i <= j {
			for v[i] < pivot {
				i++
			}
			for v[j] > pivot {
				j--
			}
			if i <= j {
				v[i], v[j] = v[j], v[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return v[k]
		}
	}
	return v[k]
}
