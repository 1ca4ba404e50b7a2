package calibrate

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// laplaceSample draws n |e| with e ~ Laplace(0, bTrue) (|e| ~ Exp(1/bTrue))
// and predicted scales bTrue/k, bTrue varying per pixel in [0.5, 2].
func laplaceSample(n int, k float64, seed uint64) (absErr, b []float32) {
	rng := rand.New(rand.NewPCG(seed, 9))
	absErr, b = make([]float32, n), make([]float32, n)
	for i := range n {
		bt := 0.5 + 1.5*rng.Float64()
		absErr[i] = float32(bt * rng.ExpFloat64())
		b[i] = float32(bt / k)
	}
	return absErr, b
}

func TestQuantileClosedForm(t *testing.T) {
	tests := []struct {
		name string
		gen  func(r *rand.Rand) float64
		q    float64
		want float64 // the distribution's q-quantile
	}{
		{"uniform 0.99", func(r *rand.Rand) float64 { return r.Float64() }, 0.99, 0.99},
		{"uniform 0.9", func(r *rand.Rand) float64 { return r.Float64() }, 0.9, 0.9},
		// Exp(1): F^-1(q) = -ln(1-q).
		{"exponential 0.99", func(r *rand.Rand) float64 { return r.ExpFloat64() }, 0.99, -math.Log(0.01)},
		// K/S = K/(K+G) with G ~ Exp(1)*10: F^-1 via the Exp quantile.
		{"epistemic-like 0.95", func(r *rand.Rand) float64 { return 32 / (32 + 10*r.ExpFloat64()) }, 0.95, 32 / (32 + 10*-math.Log(1-0.05))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			v := make([]float32, 200000)
			for i := range v {
				v[i] = float32(tc.gen(r))
			}
			got := Quantile(v, tc.q)
			// Standard error of a sample quantile: sqrt(q(1-q)/n)/f(x_q);
			// 1% relative is > 5 standard errors for all cases here.
			if math.Abs(got-tc.want) > 0.01*math.Max(1, tc.want) {
				t.Fatalf("quantile %g = %g, want %g", tc.q, got, tc.want)
			}
		})
	}
	if got := Quantile([]float32{3, 1, 2, 4}, 0.5); got != 2 {
		t.Fatalf("nearest-rank median of 1..4 = %g, want 2", got)
	}
	if !math.IsNaN(Quantile(nil, 0.5)) {
		t.Fatal("quantile of nothing must be NaN")
	}
}

// TestScaleCorrectionClosedForm: with errors Laplace of scale k*b, the
// interval of scale b covers 1-(1-c)^(1/k) of the pixels, the correction
// factor is k, and the corrected interval covers c. UCE before is
// E[b_true](1 - 1/k) (per bin, mean |e| = b_true and mean u = b_true/k);
// after it is about 0... up to the factor's choice by coverage, which for a
// Laplace is exact, so UCE after tends to 0.
func TestScaleCorrectionClosedForm(t *testing.T) {
	for _, tc := range []struct{ k, c float64 }{{2, 0.9}, {0.5, 0.9}, {1, 0.8}, {3, 0.95}} {
		t.Run(fmt.Sprintf("k=%g,c=%g", tc.k, tc.c), func(t *testing.T) {
			absErr, b := laplaceSample(300000, tc.k, 5)
			if got := ScaleCorrection(absErr, b, tc.c); math.Abs(got-tc.k)/tc.k > 0.02 {
				t.Fatalf("scale correction %g, want %g", got, tc.k)
			}
			wantBefore := 1 - math.Pow(1-tc.c, 1/tc.k)
			if got := Coverage(absErr, b, 1, tc.c); math.Abs(got-wantBefore) > 0.005 {
				t.Fatalf("coverage before %g, want %g", got, wantBefore)
			}
			corr := ScaleCorrection(absErr, b, tc.c)
			if got := Coverage(absErr, b, corr, tc.c); math.Abs(got-tc.c) > 1e-4 {
				t.Fatalf("coverage after %g, want %g", got, tc.c)
			}
			uceBefore, err := UCE(absErr, b, 1)
			if err != nil {
				t.Fatal(err)
			}
			wantUCE := 1.25 * math.Abs(1-1/tc.k) // E[b_true] = 1.25 for U[0.5, 2]
			if math.Abs(uceBefore-wantUCE) > 0.02 {
				t.Fatalf("UCE before %g, want %g", uceBefore, wantUCE)
			}
			uceAfter, err := UCE(absErr, b, corr)
			if err != nil {
				t.Fatal(err)
			}
			if uceAfter > 0.03 {
				t.Fatalf("UCE after %g, want about 0", uceAfter)
			}
		})
	}
	if got := LaplaceHalfWidth(0.9); math.Abs(got-math.Log(10)) > 1e-12 {
		t.Fatalf("half width %g", got)
	}
}

const tinyH, tinyW = 32, 64

// simDrives renders tiny simulated drives for dataset.Generate.
type simDrives struct{}

type simDrive struct {
	r *sim.Renderer
	f *sim.Frame
}

func (simDrives) OpenDrive(d dataset.Drive) (dataset.FrameRenderer, error) {
	r, err := sim.NewRenderer(sim.Config{World: sim.WorldOutdoor, Width: tinyW, Height: tinyH, Seed: d.Seed, Parallelism: 1})
	if err != nil {
		return nil, err
	}
	return &simDrive{r: r, f: sim.NewFrame(tinyW, tinyH)}, nil
}

func (d *simDrive) RenderFrame(i int, s *dataset.Sample) error {
	if err := d.r.Render(i, d.f); err != nil {
		return err
	}
	f := d.f
	*s = dataset.Sample{Frame: i, Width: f.Width, Height: f.Height, RGB: f.RGB, Sparse: f.Sparse, Dense: f.Depth, Semantic: f.Semantic}
	return nil
}

// testRig writes a tiny rendered data set (3 drives, the val drive with 4
// frames), seeded test models and a runtime config using them.
func testRig(t *testing.T) (data string, cfg *runconfig.Config) {
	t.Helper()
	dir := t.TempDir()
	data = filepath.Join(dir, "data")
	probe, err := sim.NewRenderer(sim.Config{World: sim.WorldOutdoor, Width: tinyW, Height: tinyH, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	fx, fy, cx, cy := probe.Intrinsics()
	meta := dataset.Meta{World: sim.WorldOutdoor, Seed: 1, Width: tinyW, Height: tinyH, DepthScale: dataset.KITTIDepthScale,
		Intrinsics: dataset.Intrinsics{Fx: fx, Fy: fy, Cx: cx, Cy: cy}, Semantic: "cityscapes", Sparse: "lidar-hdl64"}
	for d, split := range dataset.AssignSplits(3) {
		meta.Drives = append(meta.Drives, dataset.Drive{Name: fmt.Sprintf("outdoor_drive_%04d_sync", d),
			Seed: dataset.DriveSeed(1, d), Split: split, Count: 4, Stride: 1})
	}
	if err := dataset.Generate(context.Background(), dataset.GenerateOptions{Dir: data, Meta: meta, Workers: 2}, simDrives{}); err != nil {
		t.Fatal(err)
	}
	testmodels.Write(t, dir)
	text := fmt.Sprintf(`camera: {url: "rtsp://127.0.0.1:1/unused"}
inference: {providers: [{name: cpu}], intra_op_threads: 1}
depth:
  model: depth.onnx
  io: {input: {name: image, height: %[1]d, width: %[2]d}, depth: {name: depth, meaning: metric_depth}}
auxue:
  model: auxue.onnx
  io: {kind: auxue, input: {name: image, height: %[1]d, width: %[2]d}, depth_input: {name: depth, units: metres}, scale: {name: scale}, epistemic: {name: epistemic}}
alerts:
  vehicle: v
  camera: front
  grid: {rows: 2, cols: 2}
  mqtt: {broker: embedded, client_id: c}
  outbox: {dir: outbox}
  embedded: {allow_anonymous: true}
http: {listen: "off"}
`, tinyH, tinyW)
	if cfg, err = runconfig.Parse(filepath.Join(dir, "rt.yaml"), []byte(text), dir); err != nil {
		t.Fatal(err)
	}
	return data, cfg
}

// TestRunOnRenderedData calibrates the seeded models on a tiny rendered
// data set and checks the file's invariants: the quantile construction
// gives a coverage of at least nominal, within one pixel's share; tau_e
// and tau_a are the (1-FAR) quantiles, so about FAR of the validation
// pixels lie above them.
func TestRunOnRenderedData(t *testing.T) {
	data, cfg := testRig(t)
	const far = 0.05
	res, err := Run(context.Background(), Options{Models: cfg.ModelsConfig(), Alerts: cfg.AlertsConfig.Config, Data: data, TargetFAR: far})
	if err != nil {
		t.Fatal(err)
	}
	if res.Frames != 4 || res.Pixels == 0 || res.GTPixels == 0 {
		t.Fatalf("frames %d pixels %d gt %d", res.Frames, res.Pixels, res.GTPixels)
	}
	// The correction is the upper edge of the bin holding the 0.9-quantile
	// of |e|/b: the interval covers 0.9 plus at most that bin's pixels.
	sum, err := Shard(context.Background(), ShardOptions{Models: cfg.ModelsConfig(), Alerts: cfg.AlertsConfig.Config, Inputs: []Input{{Dir: data}}})
	if err != nil {
		t.Fatal(err)
	}
	_, inBin, _ := sum.ErrOverB.QuantileBin(0.9)
	if d := res.CoverageAfter - 0.9; d < 0 || d > float64(inBin)/float64(res.GTPixels)+1e-9 {
		t.Fatalf("coverage after %g, want 0.9 (+ at most the %d pixels of the quantile's bin, of %d)", res.CoverageAfter, inBin, res.GTPixels)
	}
	cal := res.Calibration
	if len(cal.TauEZones) != 4 || len(cal.TauAZones) != 4 || cal.TauE <= 0 || cal.TauE > 1 || cal.TauA <= 0 || cal.ScaleCorrection <= 0 {
		t.Fatalf("calibration %+v", cal)
	}
	// The zone thresholds bound events, not only pixels: on the calibration
	// frames at most a fraction FAR of them open an ood_fraction or an
	// aleatoric_fraction event.
	if res.FrameAlarmRate > far || res.AleatoricAlarmRate > far {
		t.Fatalf("frame alarm rates %g (ood) %g (aleatoric) on the calibration frames, want <= %g", res.FrameAlarmRate, res.AleatoricAlarmRate, far)
	}
	for z, v := range cal.TauAZones {
		if !(v > 0) || math.IsInf(v, 0) {
			t.Fatalf("tau_a_zones.%s = %g (global %g)", z, v, cal.TauA)
		}
	}
	for _, key := range []string{"coverage_before", "coverage_after", "uce_before_m", "uce_after_m", "frames", "target_far"} {
		if _, err := strconv.ParseFloat(cal.Meta[key], 64); err != nil {
			t.Fatalf("meta %s = %q", key, cal.Meta[key])
		}
	}
	// Round trip through the alerts file format.
	path := filepath.Join(t.TempDir(), "cal.yaml")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := alerts.WriteCalibration(f, cal); err != nil {
		t.Fatal(err)
	}
	f.Close()
	back, err := alerts.LoadCalibration(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.TauE != cal.TauE || back.ScaleCorrection != cal.ScaleCorrection || back.Meta["coverage_after"] != cal.Meta["coverage_after"] {
		t.Fatalf("round trip changed the calibration: %+v vs %+v", back, cal)
	}

	// Bad inputs get clear errors.
	if _, err := Run(context.Background(), Options{Models: cfg.ModelsConfig(), Alerts: cfg.AlertsConfig.Config, Data: data, TargetFAR: 1.5}); err == nil {
		t.Fatal("target FAR 1.5 accepted")
	}
	if _, err := Run(context.Background(), Options{Models: cfg.ModelsConfig(), Alerts: cfg.AlertsConfig.Config, Data: filepath.Join(data, "nope"), TargetFAR: far}); err == nil {
		t.Fatal("missing data set accepted")
	}
}

// The zone-event bound, hand-computed: enter 0.25 on 4 values per frame
// means a frame opens an event when its largest value exceeds tau_e (m =
// 1), so the quiet value of each frame is its maximum; with q = 1 the
// bound is the largest of them, with q = 0.5 the 2nd smallest of 4.
func TestZoneEventBoundClosedForm(t *testing.T) {
	frames := [][]float32{{0.1, 0.9, 0.2, 0.3} /* max 0.9 */, {0.5, 0.4, 0.1, 0.1} /* 0.5 */, {0.2, 0.2, 0.2, 0.3} /* 0.3 */, {0.7, 0.1, 0.1, 0.1} /* 0.7 */}
	for _, tc := range []struct {
		enter, q, want float64
	}{
		{0.25, 1, 0.9},
		{0.25, 0.5, 0.5},
		{0.5, 1, 0.4}, // m = 2: second largest per frame: 0.3, 0.4, 0.2, 0.1
		{0, 1, 0},     // no level: no bound
	} {
		var rows [][]float32
		for _, f := range frames {
			rows = append(rows, []float32{quietValue(slices.Clone(f), tc.enter)})
		}
		if got := quietQuantile(rows, 0, tc.q); math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("enter %g q %g: tau %g, want %g", tc.enter, tc.q, got, tc.want)
		}
	}
}

// TestZoneThresholdBoundsPixels: the zone threshold is the pixel quantile
// (the upper edge of its bin, 1 + 2^-10 times an integer value's, as an
// integer is a bin's lower edge) when no criterion is used, and the exact
// zone-event bound when that is larger. Hand-computed on frames {1,2,3,4}
// and {5,6,7,8}: at q 0.5 the pixel quantile is 4 (the 4th smallest);
// enter 0.5 keeps a frame quiet above its 2nd largest value (3 and 7,
// quantile 3), enter 0.25 above its largest (4 and 8, quantile 4): the
// pixel quantile's bin edge stands. At q 1 the bound gives 8, below 8's
// bin edge. At q 0.25 the pixel quantile is 2 but enter 0.5 needs 3.
func TestZoneThresholdBoundsPixels(t *testing.T) {
	frames := [][]float32{{1, 2, 3, 4}, {5, 6, 7, 8}}
	var h Hist
	for _, f := range frames {
		for _, v := range f {
			h.Add(float64(v))
		}
	}
	edge := func(v float64) float64 { return v * (1 + 1.0/(1<<MantissaBits)) }
	for _, tc := range []struct {
		enter float64 // 0: no criterion
		q     float64
		want  float64
	}{
		{0, 0.5, edge(4)},
		{0.5, 0.5, edge(4)},
		{0.25, 0.5, edge(4)},
		{0.25, 1, edge(8)},
		{0.5, 0.25, 3},
	} {
		var rows [][]float32
		for _, f := range frames {
			rows = append(rows, []float32{quietValue(slices.Clone(f), tc.enter)})
		}
		if got := zoneTau(&h, rows, 0, tc.q); got != tc.want {
			t.Errorf("enter %g q %g: %g, want %g", tc.enter, tc.q, got, tc.want)
		}
	}
}

// TestRunWithoutGroundTruth calibrates on the same frames without their
// ground truth (a data set exported from a recording): tau_e, per zone
// too, is unchanged (K/S needs no ground truth); the scale correction is
// kept from the configured calibration (1, the default), so tau_a, the
// quantile of s b / depth, is the ground-truth run's divided by its s.
func TestRunWithoutGroundTruth(t *testing.T) {
	data, cfg := testRig(t)
	const far = 0.05
	withGT, err := Run(context.Background(), Options{Models: cfg.ModelsConfig(), Alerts: cfg.AlertsConfig.Config, Data: data, TargetFAR: far})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := dataset.OpenSim(data)
	if err != nil {
		t.Fatal(err)
	}
	meta := ds.Meta
	meta.Sparse, meta.Semantic = dataset.NoGroundTruth, dataset.NoGroundTruth
	frames := filepath.Join(t.TempDir(), "frames")
	if err := dataset.Generate(context.Background(), dataset.GenerateOptions{Dir: frames, Meta: meta, Workers: 1}, simDrives{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(frames, meta.Drives[0].Name, "proj_depth")); !os.IsNotExist(err) {
		t.Fatalf("a data set without ground truth has proj_depth: %v", err)
	}
	res, err := Run(context.Background(), Options{Models: cfg.ModelsConfig(), Alerts: cfg.AlertsConfig.Config, Data: frames, TargetFAR: far})
	if err != nil {
		t.Fatal(err)
	}
	c, g := res.Calibration, withGT.Calibration
	if !res.NoGroundTruth || res.GTPixels != 0 || !math.IsNaN(res.CoverageAfter) || !math.IsNaN(res.UCEAfter) {
		t.Fatalf("result %+v", res)
	}
	if c.ScaleCorrection != 1 || c.TauE != g.TauE || fmt.Sprint(c.TauEZones) != fmt.Sprint(g.TauEZones) {
		t.Fatalf("scale correction %g (want 1), tau_e %g vs %g, zones %v vs %v", c.ScaleCorrection, c.TauE, g.TauE, c.TauEZones, g.TauEZones)
	}
	if rel := math.Abs(c.TauA*g.ScaleCorrection-g.TauA) / g.TauA; rel > 1e-6 {
		t.Fatalf("tau_a %g x s %g = %g, ground-truth run %g", c.TauA, g.ScaleCorrection, c.TauA*g.ScaleCorrection, g.TauA)
	}
	if !strings.Contains(c.Meta["scale_correction"], "needs depth ground truth") {
		t.Fatalf("meta does not say why the scale correction was kept: %v", c.Meta)
	}
	if _, ok := c.Meta["coverage_after"]; ok {
		t.Fatal("coverage reported without ground truth")
	}
}
