package calibrate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// binWidth is the relative width of a bin: 2^-MantissaBits.
const binWidth = 1.0 / (1 << MantissaBits)

// TestHistQuantileClosedForm: on the integers 1..1000 the nearest-rank
// q-quantile is ceil(1000 q), and an integer v is the lower edge of its bin,
// which is 2^(floor(log2 v) - 10) wide: 990 (in [512, 1024)) -> 990.5, 300
// (in [256, 512)) -> 300.25, 1 -> 1 + 2^-10.
func TestHistQuantileClosedForm(t *testing.T) {
	var h Hist
	for v := 1; v <= 1000; v++ {
		h.Add(float64(v))
	}
	for _, tc := range []struct{ q, want float64 }{
		{0.99, 990.5}, {0.3, 300.25}, {0.001, 1 + binWidth}, {1, 1000.5}, {0.5, 500.25},
	} {
		if got := h.Quantile(tc.q); got != tc.want {
			t.Errorf("q %g: %g, want %g", tc.q, got, tc.want)
		}
	}
	// Values < 500 are 1..499; 500.1 lies inside 500's bin, which is
	// left out whole (one bin short, as documented).
	if got := h.CountBelow(500); got != 499 {
		t.Errorf("CountBelow(500) = %d, want 499", got)
	}
	if got := h.CountBelow(500.1); got != 499 {
		t.Errorf("CountBelow(500.1) = %d, want 499", got)
	}
	if got := h.CountBelow(500.25); got != 500 {
		t.Errorf("CountBelow(500.25) = %d, want 500", got)
	}
	if h.Add(-1) || h.Add(math.NaN()) || h.Add(math.Inf(1)) || h.N() != 1000 {
		t.Fatalf("negative, NaN or infinite value counted: n %d", h.N())
	}
	var empty Hist
	if !math.IsNaN(empty.Quantile(0.5)) {
		t.Fatal("quantile of an empty histogram must be NaN")
	}
}

// TestHistWithinOneBinOfExact: on continuous samples (K/S-like in (0,1],
// exponential) the histogram quantile is the upper edge of the bin holding
// the exact nearest-rank quantile: above it by less than 2^-10 of it.
// Shards of the sample, written and read back as JSON, merge into exactly
// the whole sample's histogram.
func TestHistWithinOneBinOfExact(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, gen := range []func() float64{
		func() float64 { return 32 / (32 + 10*r.ExpFloat64()) },
		func() float64 { return r.ExpFloat64() },
	} {
		v := make([]float32, 100000)
		var whole Hist
		parts := make([]Hist, 3)
		for i := range v {
			v[i] = float32(gen())
			whole.Add(float64(v[i]))
			parts[r.IntN(3)].Add(float64(v[i]))
		}
		var merged Hist
		for _, p := range parts {
			b, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			var back Hist
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			merged.Merge(&back)
		}
		for _, q := range []float64{0.5, 0.9, 0.95, 0.99, 0.999} {
			exact := Quantile(v, q)
			got := whole.Quantile(q)
			if !(got > exact) || (got-exact)/exact > binWidth {
				t.Errorf("q %g: histogram %g, exact %g: want above by less than 2^-%d relative", q, got, exact, MantissaBits)
			}
			if m := merged.Quantile(q); m != got {
				t.Errorf("q %g: merged shards %g, whole %g", q, m, got)
			}
		}
	}
	for _, bad := range []string{`{"keys":[1,1],"counts":[1,1]}`, `{"keys":[1],"counts":[0]}`, `{"keys":[1],"counts":[]}`, `{"keys":[4194303],"counts":[1]}`} {
		var h Hist
		if err := json.Unmarshal([]byte(bad), &h); err == nil {
			t.Errorf("histogram %s accepted", bad)
		}
	}
}

// TestMergedUCEAndScaleCorrectionClosedForm: errors Laplace of scale k b
// (laplaceSample). The scale correction from the |e|/b histogram is the
// exact one (ScaleCorrection) to within a bin, hence k to 2 %; the
// coverage after it is exact at the bin edge (>= c, and c plus at most
// the bin's pixels); the UCE from the binned statistics is
// calib/metrics' to 1e-3 (fine bins straddling a UCE edge are not split:
// about 14 fine bins of some 2000 hold the pixels in question).
func TestMergedUCEAndScaleCorrectionClosedForm(t *testing.T) {
	for _, tc := range []struct{ k, c float64 }{{2, 0.9}, {0.5, 0.9}, {3, 0.95}} {
		absErr, b := laplaceSample(200000, tc.k, 7)
		var m Summary
		m.Zones = nil
		for i := range absErr {
			e, s := float64(absErr[i]), float64(b[i])
			m.UCE.Add(e, s)
			m.ErrOverB.Add(e / s)
		}
		m.GTPixels = int64(len(absErr))
		l := LaplaceHalfWidth(tc.c)
		corr := m.ErrOverB.Quantile(tc.c) / l
		exact := ScaleCorrection(absErr, b, tc.c)
		if !(corr >= exact) || (corr-exact)/exact > 2*binWidth || math.Abs(corr-tc.k)/tc.k > 0.02 {
			t.Errorf("k %g: corr %g, exact %g", tc.k, corr, exact)
		}
		_, inBin, _ := m.ErrOverB.QuantileBin(tc.c)
		cov := float64(m.ErrOverB.CountBelow(corr*l*(1+1e-12))) / float64(m.GTPixels)
		if cov < tc.c || cov > tc.c+float64(inBin)/float64(m.GTPixels)+1e-9 {
			t.Errorf("k %g: coverage after %g, want %g + at most %d of %d", tc.k, cov, tc.c, inBin, m.GTPixels)
		}
		if exactCov := Coverage(absErr, b, corr, tc.c); math.Abs(exactCov-cov) > 1e-5 {
			t.Errorf("k %g: coverage from the histogram %g, from the pixels %g", tc.k, cov, exactCov)
		}
		for _, s := range []float64{1, corr} {
			want, err := UCE(absErr, b, s)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.UCE.UCE(s, 15); math.Abs(got-want) > 1e-3 {
				t.Errorf("k %g s %g: UCE from statistics %g, from pixels %g", tc.k, s, got, want)
			}
		}
	}
}

// exactReference recomputes, pixel by pixel with exact nearest-rank
// quantiles (the pre-histogram algorithm), tau_e overall and per zone, the
// scale correction and tau_a on the val split.
func exactReference(t *testing.T, cfg *runconfig.Config, data string, far float64) alerts.Calibration {
	t.Helper()
	models, err := infer.OpenModels(context.Background(), cfg.ModelsConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer models.Close()
	ds, err := dataset.Open(dataset.Source{Dir: data})
	if err != nil {
		t.Fatal(err)
	}
	items, err := ds.Items("val")
	if err != nil {
		t.Fatal(err)
	}
	base, err := cfg.AlertsConfig.LoadCalibrationFor()
	if err != nil {
		t.Fatal(err)
	}
	zones, ignore, err := cfg.AlertsConfig.ZoneSet.Resolve("alerts")
	if err != nil {
		t.Fatal(err)
	}
	var all, ratio, absErr, scale []float32
	zoneKS := make([][]float32, len(zones))
	quiet := make([][]float32, len(zones))
	for _, it := range items {
		s, err := ds.Load(it)
		if err != nil {
			t.Fatal(err)
		}
		m, err := models.Infer(context.Background(), s.RGB, s.Width, s.Height)
		if err != nil {
			t.Fatal(err)
		}
		raster, err := alerts.Rasterize(zones, ignore, s.Width, s.Height)
		if err != nil {
			t.Fatal(err)
		}
		ok := func(i int) bool { return m.Depth[i] > 0 && m.Scale[i] >= 0 }
		for i := range m.Depth {
			if !ok(i) {
				continue
			}
			all = append(all, m.Epistemic[i])
			ratio = append(ratio, m.Scale[i]/m.Depth[i])
			if y := s.Sparse[i]; y > 0 {
				absErr = append(absErr, float32(math.Abs(float64(m.Depth[i]-y))))
				scale = append(scale, m.Scale[i])
			}
		}
		for z, px := range raster {
			var fv []float32
			for _, i := range px {
				if ok(int(i)) {
					fv = append(fv, m.Epistemic[i])
				}
			}
			zoneKS[z] = append(zoneKS[z], fv...)
			if len(fv) > 0 {
				quiet[z] = append(quiet[z], quietValue(fv, base.Levels.OODFraction.Warn.Enter))
			}
		}
	}
	q := 1 - far
	cal := alerts.Calibration{TauE: Quantile(all, q), TauEZones: map[string]float64{}, ScaleCorrection: ScaleCorrection(absErr, scale, 0.9)}
	for z, zone := range zones {
		cal.TauEZones[zone.Name] = math.Max(Quantile(zoneKS[z], q), Quantile(quiet[z], q))
	}
	for i := range ratio {
		ratio[i] *= float32(cal.ScaleCorrection)
	}
	cal.TauA = Quantile(ratio, q)
	return cal
}

// TestShardMergeEqualsSingleRun: three shards of the tiny rendered data
// set (4 val frames: shards of 1, 1 and 2 frames), each written as JSON
// and read back, merge into exactly the single-process run's calibration
// (the histograms add, the per-frame values concatenate). Five shards
// (one of them empty) merge into the same. Against the exact pixel
// algorithm every threshold is within one bin: above the exact quantile by
// less than 2^-10 of it (or equal, where the exact zone-event bound
// decides), the scale correction likewise.
func TestShardMergeEqualsSingleRun(t *testing.T) {
	data, cfg := testRig(t)
	const far = 0.05
	ctx := context.Background()
	single, err := Run(ctx, Options{Models: cfg.ModelsConfig(), Alerts: cfg.AlertsConfig.Config, Data: data, TargetFAR: far})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{3, 5} {
		var named []Named
		frames := 0
		for i := range k {
			s, err := Shard(ctx, ShardOptions{Models: cfg.ModelsConfig(), Alerts: cfg.AlertsConfig.Config, Inputs: []Input{{Dir: data}}, Index: i, Count: k})
			if err != nil {
				t.Fatal(err)
			}
			frames += int(s.Frames)
			var buf bytes.Buffer
			if err := s.Write(&buf); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("shard-%d.json", i)
			back, err := ReadSummary(&buf, name)
			if err != nil {
				t.Fatal(err)
			}
			named = append(named, Named{Name: name, Summary: back})
		}
		if frames != 4 {
			t.Fatalf("%d shards hold %d frames, want 4", k, frames)
		}
		merged, err := Merge(named, MergeOptions{TargetFAR: far})
		if err != nil {
			t.Fatal(err)
		}
		a, b := merged.Calibration, single.Calibration
		if a.TauE != b.TauE || a.TauA != b.TauA || a.ScaleCorrection != b.ScaleCorrection ||
			fmt.Sprint(a.TauEZones) != fmt.Sprint(b.TauEZones) || fmt.Sprint(a.TauAZones) != fmt.Sprint(b.TauAZones) ||
			merged.CoverageAfter != single.CoverageAfter || merged.FrameAlarmRate != single.FrameAlarmRate ||
			merged.AleatoricAlarmRate != single.AleatoricAlarmRate || merged.Pixels != single.Pixels {
			t.Fatalf("%d shards merged: %+v\nsingle run: %+v", k, merged, single)
		}
		if math.Abs(merged.UCEAfter-single.UCEAfter) > 1e-12 {
			t.Fatalf("UCE after: merged %g, single %g", merged.UCEAfter, single.UCEAfter)
		}
	}
	exact := exactReference(t, cfg, data, far)
	within := func(what string, got, want float64) {
		if got < want || (got-want)/want > binWidth*(1+1e-9) {
			t.Errorf("%s: %g, exact %g: want within one bin above (2^-%d relative)", what, got, want, MantissaBits)
		} else {
			t.Logf("%s: %g, exact %g (%.2g relative)", what, got, want, (got-want)/want)
		}
	}
	c := single.Calibration
	within("tau_e", c.TauE, exact.TauE)
	for z, v := range exact.TauEZones {
		within("tau_e_zones."+z, c.TauEZones[z], v)
	}
	within("scale_correction", c.ScaleCorrection, exact.ScaleCorrection)
	// tau_a carries the correction's bin too: at most two bins above.
	if got, want := c.TauA, exact.TauA; got < want*(1-1e-6) || (got-want)/want > 2.01*binWidth {
		t.Errorf("tau_a %g, exact %g", got, want)
	}
}

// TestMergeRefuses: summaries of another model, spec or zone set, a shard
// given twice, a missing shard, and a data set in two listings are
// refused with messages naming the summaries and what differs.
func TestMergeRefuses(t *testing.T) {
	data, cfg := testRig(t)
	ctx := context.Background()
	shard := func(i, k int) *Summary {
		s, err := Shard(ctx, ShardOptions{Models: cfg.ModelsConfig(), Alerts: cfg.AlertsConfig.Config, Inputs: []Input{{Dir: data}}, Index: i, Count: k})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := shard(0, 2), shard(1, 2)
	o := MergeOptions{TargetFAR: 0.05}
	clone := func(s *Summary) *Summary {
		var buf bytes.Buffer
		if err := s.Write(&buf); err != nil {
			t.Fatal(err)
		}
		c, err := ReadSummary(&buf, "clone")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	other := clone(b)
	other.Models.AuxUESHA256 = strings.Repeat("0", 64)
	other.Models.AuxUE = "other/auxue.onnx"
	_, err := Merge([]Named{{"a.json", a}, {"b.json", other}}, o)
	testmodels.MustContain(t, err, "b.json has auxue model sha256 "+strings.Repeat("0", 64)+" (other/auxue.onnx)", "a.json has "+a.Models.AuxUESHA256, "do not merge")
	spec := clone(b)
	spec.Models.DepthSpec = "x"
	_, err = Merge([]Named{{"a.json", a}, {"b.json", spec}}, o)
	testmodels.MustContain(t, err, "depth spec sha256 x", "a.json")
	_, err = Merge([]Named{{"a.json", a}, {"a2.json", clone(a)}, {"b.json", b}}, o)
	testmodels.MustContain(t, err, "a.json and a2.json are both shard 0 of 2")
	_, err = Merge([]Named{{"a.json", a}}, o)
	testmodels.MustContain(t, err, "shard(s) 1 missing")
	whole := shard(0, 1)
	_, err = Merge([]Named{{"a.json", a}, {"b.json", b}, {"whole.json", whole}}, o)
	testmodels.MustContain(t, err, "whole.json: listing", "cut into 1 shards of 4 frames, another summary says 2 of 4")
	firstTwo, err := Shard(ctx, ShardOptions{Models: cfg.ModelsConfig(), Alerts: cfg.AlertsConfig.Config, Inputs: []Input{{Dir: data}}, MaxFrames: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Merge([]Named{{"a.json", a}, {"b.json", b}, {"two.json", firstTwo}}, o)
	testmodels.MustContain(t, err, "data set "+data+" is in listings")
	for _, bad := range []struct{ text, want string }{
		{`{"format":"other"}`, "format \"other\""},
		{`{"format":"` + SummaryFormat + `","mantissa_bits":10,"surprise":1}`, "unknown field \"surprise\""},
		{`{"format":"` + SummaryFormat + `","mantissa_bits":8}`, "mantissa_bits 8"},
		{`{"format":"` + SummaryFormat + `","mantissa_bits":10,"pixels":3}`, "3 pixels"},
	} {
		_, err := ReadSummary(strings.NewReader(bad.text), "bad.json")
		testmodels.MustContain(t, err, "bad.json", bad.want)
	}
}
