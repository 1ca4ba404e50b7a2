package alerts

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func testCal() Calibration {
	c := DefaultCalibration()
	c.TauE, c.TauA, c.ScaleCorrection, c.Coverage = 0.5, 0.3, 2, 0.5
	return c
}

func TestAssessClosedForm(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	// 4x2 map, grid 1x2: r0c0 = pixels 0,1,4,5; r0c1 = pixels 2,3,6,7.
	m := Maps{Width: 4, Height: 2,
		Epistemic: []float32{0.1, 0.7, 0.2, 0.2, 0.9, 0.3, nan, 0.8},
		Depth:     []float32{10, 5, nan, 4, 20, 2, 3, 6},
		Scale:     []float32{1, 2, 1, inf, 0.5, 0.1, 1, 0.5},
	}
	zs := ZoneSet{Grid: &GridSpec{Rows: 1, Cols: 2}}
	zones, _, err := zs.Resolve("")
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAssessor(zones, nil, testCal())
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.Assess(m)
	if err != nil {
		t.Fatal(err)
	}
	ln2 := math.Ln2
	// Zone 0: b' = 2b = 2, 4, 1, 0.2; b'/d = .2, .8, .05, .1 -> 1 of 4 above 0.3.
	// K/S .1 .7 .9 .3 -> 2 of 4 above 0.5; p95 by nearest rank = 4th of 4 = 0.9.
	// Lower ends d - b' ln2: 10-2ln2, 5-4ln2, 20-ln2, 2-0.2ln2 -> min 2-0.2ln2 = 1.8614.
	want0 := ZoneRisk{Zone: "r0c0", Pixels: 4, Valid: 4, OODFraction: 0.5, EpistemicP95: 0.9,
		AleatoricFraction: 0.25, NearestDepth: 2, PessimisticDepth: float32(2 - 0.2*ln2)}
	// Zone 1: only pixel 7 is valid (NaN depth, Inf scale, NaN K/S elsewhere):
	// K/S .8 > .5; b'/d = 1/6 < .3; lower end 6 - ln2.
	want1 := ZoneRisk{Zone: "r0c1", Pixels: 4, Valid: 1, OODFraction: 1, EpistemicP95: 0.8,
		AleatoricFraction: 0, NearestDepth: 6, PessimisticDepth: float32(6 - ln2)}
	for i, want := range []ZoneRisk{want0, want1} {
		g := got[i]
		if g.Zone != want.Zone || g.Pixels != want.Pixels || g.Valid != want.Valid ||
			g.OODFraction != want.OODFraction || g.EpistemicP95 != want.EpistemicP95 ||
			g.AleatoricFraction != want.AleatoricFraction || g.NearestDepth != want.NearestDepth ||
			math.Abs(float64(g.PessimisticDepth-want.PessimisticDepth)) > 1e-5 {
			t.Errorf("zone %d: got %+v\nwant %+v", i, g, want)
		}
	}
}

func TestAssessPessimisticClampsAtZero(t *testing.T) {
	c := testCal()
	c.Coverage = 0.99 // ln(100) = 4.6
	a, err := NewAssessor([]Zone{{Name: "all", Polygon: [][2]float64{{0, 0}, {1, 0}, {1, 1}, {0, 1}}}}, nil, c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.Assess(Maps{Width: 1, Height: 1, Epistemic: []float32{0.1}, Depth: []float32{3}, Scale: []float32{1}})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].PessimisticDepth != 0 || got[0].NearestDepth != 3 {
		t.Fatalf("got %+v, want pessimistic 0 (3 - 2*4.6 < 0) and nearest 3", got[0])
	}
}

func TestAssessBadInput(t *testing.T) {
	a, err := NewAssessor([]Zone{{Name: "all", Polygon: [][2]float64{{0, 0}, {1, 0}, {1, 1}}}}, nil, DefaultCalibration())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []Maps{
		{Width: 2, Height: 2, Epistemic: make([]float32, 4), Scale: make([]float32, 3), Depth: make([]float32, 4)},
		{Width: 0, Height: 2},
		{Width: -1, Height: -4, Epistemic: make([]float32, 4), Scale: make([]float32, 4), Depth: make([]float32, 4)},
	} {
		if _, err := a.Assess(m); err == nil {
			t.Errorf("maps %dx%d with lengths %d/%d/%d accepted", m.Width, m.Height, len(m.Epistemic), len(m.Scale), len(m.Depth))
		}
	}
}

// reference computes the metrics of one zone the slow way (float64, sort).
func reference(idx []int32, m Maps, tauE, tauA, corr, cov float64) ZoneRisk {
	var vals []float64
	r := ZoneRisk{Pixels: len(idx)}
	nearest, pess := math.Inf(1), math.Inf(1)
	ood, alea := 0, 0
	for _, p := range idx {
		d, e, b := float64(m.Depth[p]), float64(m.Epistemic[p]), float64(m.Scale[p])*corr
		if !(d > 0) || math.IsInf(d, 0) || math.IsNaN(e) || math.IsInf(e, 0) || !(b >= 0) || math.IsInf(b, 0) {
			continue
		}
		vals = append(vals, e)
		if e > tauE {
			ood++
		}
		if b/d > tauA {
			alea++
		}
		nearest = math.Min(nearest, d)
		pess = math.Min(pess, d-b*math.Log(1/(1-cov)))
	}
	r.Valid = len(vals)
	if r.Valid == 0 {
		return r
	}
	slices.Sort(vals)
	r.EpistemicP95 = float32(vals[int(math.Ceil(0.95*float64(len(vals))))-1])
	r.OODFraction = float32(float64(ood) / float64(r.Valid))
	r.AleatoricFraction = float32(float64(alea) / float64(r.Valid))
	r.NearestDepth = float32(nearest)
	r.PessimisticDepth = float32(math.Max(pess, 0))
	return r
}

func randomMaps(rng *rand.Rand, w, h int) Maps {
	m := Maps{Width: w, Height: h, Epistemic: make([]float32, w*h), Scale: make([]float32, w*h), Depth: make([]float32, w*h)}
	for i := range m.Depth {
		// Quantized K/S gives many ties, as real saturated maps do.
		m.Epistemic[i] = float32(1+rng.IntN(64)) / 64
		m.Depth[i] = 0.5 + 80*rng.Float32()
		m.Scale[i] = 0.02 * m.Depth[i] * 10 * rng.Float32()
		if rng.IntN(50) == 0 {
			m.Depth[i] = float32(math.NaN())
		}
	}
	return m
}

func TestAssessMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	zs := ZoneSet{Zones: []ZoneSpec{
		{Name: "lane", Polygon: [][2]float64{{0.4, 0.5}, {0.6, 0.5}, {0.9, 1}, {0.1, 1}}},
		{Name: "left", Polygon: [][2]float64{{0, 0.3}, {0.3, 0.3}, {0.3, 1}, {0, 1}}},
	}, Grid: &GridSpec{Rows: 2, Cols: 3}, Ignore: []ZoneSpec{{Name: "hood", Polygon: [][2]float64{{0, 0.9}, {1, 0.9}, {1, 1}, {0, 1}}}}}
	zones, ignore, err := zs.Resolve("")
	if err != nil {
		t.Fatal(err)
	}
	cal := testCal()
	cal.TauEZones = map[string]float64{"lane": 0.3}
	a, err := NewAssessor(zones, ignore, cal)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range [][2]int{{64, 24}, {97, 31}, {64, 24}} { // size change re-rasterizes
		m := randomMaps(rng, size[0], size[1])
		got, err := a.Assess(m)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := Rasterize(zones, ignore, size[0], size[1])
		for i, z := range zones {
			want := reference(r[i], m, cal.tauEFor(z.Name), cal.TauA, cal.ScaleCorrection, cal.Coverage)
			g := got[i]
			if g.Pixels != want.Pixels || g.Valid != want.Valid || g.EpistemicP95 != want.EpistemicP95 ||
				g.NearestDepth != want.NearestDepth ||
				math.Abs(float64(g.OODFraction-want.OODFraction)) > 1e-6 ||
				math.Abs(float64(g.AleatoricFraction-want.AleatoricFraction)) > 2/float64(want.Valid) ||
				math.Abs(float64(g.PessimisticDepth-want.PessimisticDepth)) > 1e-3 {
				t.Errorf("%dx%d zone %s: got %+v\nwant %+v", size[0], size[1], z.Name, g, want)
			}
		}
	}
}

func TestNthElementMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 300; trial++ {
		n := 1 + rng.IntN(200)
		v := make([]float32, n)
		levels := 1 + rng.IntN(10)
		for i := range v {
			v[i] = float32(rng.IntN(levels))
		}
		s := slices.Clone(v)
		slices.Sort(s)
		k := rng.IntN(n)
		if got := nthElement(slices.Clone(v), k); got != s[k] {
			t.Fatalf("nthElement(%v, %d) = %v, want %v", v, k, got, s[k])
		}
	}
}

func TestAssessDoesNotAllocate(t *testing.T) {
	a, m := benchSetup(t)
	if _, err := a.Assess(m); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() { a.Assess(m) }); n != 0 {
		t.Fatalf("Assess allocates %v times per frame", n)
	}
}

func benchSetup(tb testing.TB) (*Assessor, Maps) {
	zs := ZoneSet{Grid: &GridSpec{Rows: 2, Cols: 4}, Ignore: []ZoneSpec{{Name: "hood", Polygon: [][2]float64{{0, 0.92}, {1, 0.92}, {1, 1}, {0, 1}}}}}
	zones, ignore, err := zs.Resolve("")
	if err != nil {
		tb.Fatal(err)
	}
	a, err := NewAssessor(zones, ignore, DefaultCalibration())
	if err != nil {
		tb.Fatal(err)
	}
	return a, randomMaps(rand.New(rand.NewPCG(5, 6)), 640, 192)
}

// BenchmarkAssess8Zones192x640 is one frame of risk assessment: 8 grid
// zones over a 192x640 map with a hood mask. Goal: <= 1 ms, 0 allocs.
func BenchmarkAssess8Zones192x640(b *testing.B) {
	a, m := benchSetup(b)
	if _, err := a.Assess(m); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := a.Assess(m); err != nil {
			b.Fatal(err)
		}
	}
}
