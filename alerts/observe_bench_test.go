package alerts

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// roadMaps are maps shaped like the reference models' output on a road
// camera (continuous values, not quantized): below the horizon a ground
// plane whose depth grows toward it, with K/S low on the road and b about
// 5 % of the depth; above it buildings and sky with high K/S and far
// depth; smooth variation plus per-pixel noise, as network outputs have
// (neighbouring pixels land in the same histogram bin, as in real maps).
// ood raises K/S everywhere (the scene the models never saw).
func roadMaps(rng *rand.Rand, w, h int, ood bool) Maps {
	m := Maps{Width: w, Height: h, Epistemic: make([]float32, w*h), Scale: make([]float32, w*h), Depth: make([]float32, w*h)}
	horizon := 0.45 * float64(h)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			i := y*w + x
			u := float64(x) / float64(w)
			smooth := 0.5 + 0.5*math.Sin(6*u+float64(y)/17)
			var d, e float64
			if float64(y) > horizon+1 {
				d = 1.65 * 0.9 * float64(h) / (float64(y) - horizon) // camera 1.65 m above the road
				e = 0.08 + 0.12*smooth + 0.03*rng.Float64()
			} else {
				d = 40 + 40*smooth
				e = 0.55 + 0.3*smooth + 0.1*rng.Float64()
			}
			if ood {
				e = min(1, e+0.5+0.1*rng.Float64())
			}
			d *= 1 + 0.02*(rng.Float64()-0.5)
			m.Depth[i] = float32(d)
			m.Epistemic[i] = float32(e)
			m.Scale[i] = float32(d * (0.03 + 0.04*rng.Float64()))
		}
	}
	return m
}

// exampleSpec is the engine spec of configs/alerts-example.yaml (the
// reference zones: ego lane, shoulders, a 1x4 grid, the hood mask, and
// its calibration).
func exampleSpec(tb testing.TB) EngineSpec {
	c, err := loadDomainConfig("../configs/alerts-example.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	spec, err := c.EngineSpec("")
	if err != nil {
		tb.Fatal(err)
	}
	spec.Config.Now = func() time.Time { return time.Unix(1e9, 0) }
	return spec
}

// latencySpec is the set-up of `didoedge bench latency`: one zone over
// the whole frame, a calibration that makes every pixel out of
// distribution, an update event on every frame.
func latencySpec(tb testing.TB) EngineSpec {
	cal, err := ParseCalibration("alarm.yaml", []byte(`version: 1
tau_e: 0.000001
tau_a: 1000
scale_correction: 1
coverage: 0.9
levels:
  ood_fraction: {warn: {enter: 0.5, exit: 0.4}, critical: {enter: 0.9, exit: 0.8}}
`))
	if err != nil {
		tb.Fatal(err)
	}
	return EngineSpec{Config: EngineConfig{Vehicle: "v", Camera: "front", Timing: DefaultTiming(), UpdateInterval: time.Millisecond,
		Now: func() time.Time { return time.Unix(1e9, 0) }},
		Zones: []Zone{{Name: "frame", Polygon: [][2]float64{{0, 0}, {1, 0}, {1, 1}, {0, 1}}}}, Calibration: cal}
}

// BenchmarkAlertsStage is the alert engine's share of the pipeline's
// alerts stage on a 640x192 frame: "assess" the zone metrics alone (and
// "assess_before", the assessment as it was before the AVX2 pixel loop,
// assess_baseline_test.go, on the same maps in the same run), "observe"
// engine.Observe (assessment, fusion, hysteresis, the events; no sinks:
// mqttpub's BenchmarkServiceEvent measures those), for the reference
// zones of configs/alerts-example.yaml on road-like maps and for the
// set-up of `didoedge bench latency` (one zone over the frame, an event on
// every frame).
//
//	go test ./alerts -run '^$' -bench AlertsStage -benchmem
func BenchmarkAlertsStage(b *testing.B) {
	type setup struct {
		name string
		spec EngineSpec
		ood  bool
	}
	for _, s := range []setup{
		{"reference_zones", exampleSpec(b), false},
		{"bench_latency", latencySpec(b), true},
	} {
		m := roadMaps(rand.New(rand.NewPCG(7, 8)), 640, 192, s.ood)
		for _, before := range []bool{true, false} {
			name := s.name + "/assess"
			if before {
				name += "_before"
			}
			b.Run(name, func(b *testing.B) {
				a, err := NewAssessor(s.spec.Zones, s.spec.Ignore, s.spec.Calibration)
				if err != nil {
					b.Fatal(err)
				}
				assess := a.Assess
				if before {
					assess = a.assessBaseline
				}
				if _, err := assess(m); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := assess(m); err != nil {
						b.Fatal(err)
					}
				}
				pixels := 0
				for _, r := range a.out {
					pixels += r.Pixels
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(pixels), "ns/zone-pixel")
			})
		}
		b.Run(s.name+"/observe", func(b *testing.B) {
			e, err := NewEngine(s.spec, nil)
			if err != nil {
				b.Fatal(err)
			}
			capture := time.Unix(1e9, 0)
			seq := uint64(0)
			b.ReportAllocs()
			for b.Loop() {
				seq++
				capture = capture.Add(66 * time.Millisecond)
				if err := e.Observe(Frame{Seq: seq, Capture: capture}, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// loadDomainConfig reads the alerts domain's keys of an alerts section
// (the transports' keys are the deployment config's to check: this test
// package cannot import it), with defaults and paths resolved.
func loadDomainConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	var c Config
	if err := yaml.Unmarshal(data, &c); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	c.ResolvePaths(filepath.Dir(path))
	return c, nil
}
