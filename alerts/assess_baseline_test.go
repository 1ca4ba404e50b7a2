package alerts

// This file keeps the assessment as it was before the AVX2 pixel loop
// (issue 19): the oracle of TestAssessKernelMatchesGo and the "before" of
// BenchmarkAlertsStage.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// assessBaseline is Assess before the AVX2 pixel loop, verbatim.
func (a *Assessor) assessBaseline(m Maps) ([]ZoneRisk, error) {
	n := m.Width * m.Height
	if m.Width <= 0 || m.Height <= 0 {
		return nil, fmt.Errorf("assess: bad map size %dx%d", m.Width, m.Height)
	}
	if len(m.Epistemic) != n || len(m.Scale) != n || len(m.Depth) != n {
		return nil, fmt.Errorf("assess: map lengths epistemic %d, scale %d, depth %d, want %d (%dx%d)",
			len(m.Epistemic), len(m.Scale), len(m.Depth), n, m.Width, m.Height)
	}
	if err := a.prepare(m.Width, m.Height); err != nil {
		return nil, fmt.Errorf("assess: %w", err)
	}
	for zi, spans := range a.spans {
		tauE, tauA, corr, lnCov := a.tauE[zi], a.tauA[zi], a.corr, a.lnCov
		buf := a.scratch
		hist := &a.hist
		clear(hist[:])
		n, ood, alea := 0, 0, 0
		nearest, pess := float32(math.MaxFloat32), float32(math.MaxFloat32)
		for _, sp := range spans {
			epi := m.Epistemic[sp.start:sp.end]
			depth := m.Depth[sp.start:sp.end]
			depth = depth[:len(epi)]
			scale := m.Scale[sp.start:sp.end]
			scale = scale[:len(epi)]
			for j, e := range epi {
				d, b := depth[j], scale[j]*corr
				// x*0 is 0 for finite x and NaN for NaN or Inf, and every
				// comparison with NaN is false: one test covers all three.
				if !(d*0+e*0+b*0 == 0 && d > 0 && b >= 0) {
					continue
				}
				buf[n] = e
				n++
				hist[min(max(int(e*histBins), 0), histBins-1)]++
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
		r.EpistemicP95 = percentileHistBaseline(buf[:n], hist, 0.95)
	}
	return a.out, nil
}

// percentileHistBaseline is percentileHist before the AVX2 pixel loop:
// the q-quantile of v by the nearest-rank rule (the
// ceil(q*n)-th smallest value), exactly: the histogram of v (built with
// the same binning as here) finds the bin holding that rank, and an
// nth-element selection among the values of that bin finishes. v is
// reordered; nothing is allocated.
func percentileHistBaseline(v []float32, hist *[histBins]uint32, q float64) float32 {
	k := int(math.Ceil(q*float64(len(v)))) - 1
	k = min(max(k, 0), len(v)-1)
	below, bin := 0, 0
	for ; bin < histBins-1; bin++ {
		if below+int(hist[bin]) > k {
			break
		}
		below += int(hist[bin])
	}
	m := 0
	lo, hi := float32(math.MaxFloat32), float32(-math.MaxFloat32)
	for _, e := range v {
		if min(max(int(e*histBins), 0), histBins-1) == bin {
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

// specialMaps are randomMaps with every kind of value the validity test
// and the minima must get right, scattered: NaN and ±Inf in each map,
// zero, negative and -0 depth and scale, negative and > 1 K/S, scales so
// large that the Laplace interval's lower end is negative, ties.
func specialMaps(rng *rand.Rand, w, h int, share int) Maps {
	m := randomMaps(rng, w, h)
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negZero := float32(math.Copysign(0, -1))
	specials := []float32{nan, inf, -inf, 0, negZero, -1, 2, 1e30, 1e-40}
	for i := range m.Depth {
		if rng.IntN(share) != 0 {
			continue
		}
		v := specials[rng.IntN(len(specials))]
		switch rng.IntN(3) {
		case 0:
			m.Epistemic[i] = v
		case 1:
			m.Depth[i] = v
		default:
			m.Scale[i] = v
		}
	}
	return m
}

// TestAssessKernelMatchesGo: the assessment with the AVX2 loops (on CPUs
// that have them), with the Go loops alone, and as it was before the
// kernels give bit-identical results for every zone, on maps of odd
// sizes (tails), road-like maps, quantized maps with ties, and maps full
// of NaN, Inf, zeros of both signs and negative values, rare and dense.
// The 95th percentile is checked against a sort of the zone's valid
// values instead: the assessment before the kernels put a K/S above 2^53
// (1e30 here) into the lowest histogram bin, out of order, and could
// return a smaller value (now histBin clamps before converting).
func TestAssessKernelMatchesGo(t *testing.T) {
	if !haveSpanKernel {
		t.Log("no AVX2 here: the Go loop is compared with the baseline only")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	zs := ZoneSet{Zones: []ZoneSpec{
		{Name: "lane", Polygon: [][2]float64{{0.4, 0.5}, {0.6, 0.5}, {0.9, 1}, {0.1, 1}}},
		{Name: "left", Polygon: [][2]float64{{0, 0.3}, {0.3, 0.3}, {0.3, 1}, {0, 1}}},
		{Name: "all", Polygon: [][2]float64{{0, 0}, {1, 0}, {1, 1}, {0, 1}}},
	}, Grid: &GridSpec{Rows: 2, Cols: 3}, Ignore: []ZoneSpec{{Name: "hood", Polygon: [][2]float64{{0, 0.9}, {1, 0.9}, {1, 1}, {0, 1}}}}}
	zones, ignore, err := zs.Resolve("")
	if err != nil {
		t.Fatal(err)
	}
	cal := testCal()
	cal.TauEZones = map[string]float64{"lane": 0.3}
	type input struct {
		name string
		m    Maps
	}
	var inputs []input
	for _, size := range [][2]int{{640, 192}, {97, 31}, {13, 7}, {9, 3}} {
		w, h := size[0], size[1]
		inputs = append(inputs,
			input{fmt.Sprintf("random %dx%d", w, h), randomMaps(rng, w, h)},
			input{fmt.Sprintf("road %dx%d", w, h), roadMaps(rng, w, h, false)},
			input{fmt.Sprintf("road ood %dx%d", w, h), roadMaps(rng, w, h, true)},
			input{fmt.Sprintf("rare specials %dx%d", w, h), specialMaps(rng, w, h, 500)},
			input{fmt.Sprintf("dense specials %dx%d", w, h), specialMaps(rng, w, h, 3)},
		)
	}
	same := func(a, b ZoneRisk) bool {
		bits := math.Float32bits
		return a.Zone == b.Zone && a.Pixels == b.Pixels && a.Valid == b.Valid &&
			bits(a.OODFraction) == bits(b.OODFraction) && bits(a.EpistemicP95) == bits(b.EpistemicP95) &&
			bits(a.AleatoricFraction) == bits(b.AleatoricFraction) && bits(a.NearestDepth) == bits(b.NearestDepth) &&
			bits(a.PessimisticDepth) == bits(b.PessimisticDepth)
	}
	for _, in := range inputs {
		base, _ := NewAssessor(zones, ignore, cal)
		want, err := base.assessBaseline(in.m)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := Rasterize(zones, ignore, in.m.Width, in.m.Height)
		for i, z := range zones {
			want[i].EpistemicP95 = reference(r[i], in.m, cal.tauEFor(z.Name), cal.TauA, cal.ScaleCorrection, cal.Coverage).EpistemicP95
		}
		for _, kernel := range []bool{false, haveSpanKernel} {
			a, _ := NewAssessor(zones, ignore, cal)
			a.kernel = kernel
			got, err := a.Assess(in.m)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if !same(got[i], want[i]) {
					t.Errorf("%s, kernel %v, zone %s:\n got %+v\nwant %+v", in.name, kernel, want[i].Zone, got[i], want[i])
				}
			}
		}
	}
}
