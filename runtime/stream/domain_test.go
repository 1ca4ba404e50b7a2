package stream

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/runtime/domain"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// testRecord is a k-NN record of 40 standard-normal frames: in-domain
// distances about 1/sqrt(2) x (the k-NN radius), foreign ones large.
func testRecord(t *testing.T) *domain.Record {
	t.Helper()
	l := domain.DefaultLayout(false)
	rng := rand.New(rand.NewPCG(1, 1))
	frames := make([][]float64, 40)
	for i := range frames {
		frames[i] = make([]float64, l.Dim())
		for j := range frames[i] {
			frames[i][j] = rng.NormFloat64()
		}
	}
	r, err := domain.Fit(l, frames, domain.FitOptions{Statistic: domain.KNN})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDomainThresholdSources: domain.threshold's number wins, then the
// calibration's domain_threshold, then the record's at the false-alarm rate.
func TestDomainThresholdSources(t *testing.T) {
	rec := testRecord(t)
	atFAR, err := rec.Threshold(0.01)
	if err != nil {
		t.Fatal(err)
	}
	cal := alerts.DefaultCalibration()
	d := runconfig.DomainConfig{Window: time.Second, FalseAlarmRate: 0.01}
	for _, c := range []struct {
		cfg    float64
		cal    float64
		want   float64
		source string
	}{{2.5, 3, 2.5, "domain.threshold"}, {0, 3, 3, "calibration"}, {0, 0, atFAR, "record"}} {
		d.Threshold.Value, cal.DomainThreshold = c.cfg, c.cal
		m, err := newDomainMonitor(rec, d, cal)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.domainStatusThreshold(); got != c.want || !strings.Contains(m.source, c.source) {
			t.Errorf("config %v, calibration %v: threshold %v from %q, want %v from %s", c.cfg, c.cal, got, m.source, c.want, c.source)
		}
	}
	if m, err := newDomainMonitor(nil, d, cal); m != nil || err != nil {
		t.Errorf("no record: monitor %v, %v", m, err)
	}
}

// TestDomainHealthDegradesWhenShiftLasts: a shift is reported in the
// domain check at once; after domain.persistence the camera is degraded
// with the reason that names the remedy; back in the domain, ok again.
func TestDomainHealthDegradesWhenShiftLasts(t *testing.T) {
	p := 2 * time.Second
	d := runconfig.DomainConfig{Window: time.Second, Threshold: runconfig.DomainThreshold{Value: 1}, FalseAlarmRate: 0.01, Persistence: &p}
	m, err := newDomainMonitor(testRecord(t), d, alerts.DefaultCalibration())
	if err != nil {
		t.Fatal(err)
	}
	c := &cameraPipe{dom: m}
	t0 := time.Now().Add(-time.Minute)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 100 * time.Millisecond) }
	m.observe(at(0), 0.5)
	if ok, detail := c.domainHealth(); !ok || !strings.Contains(detail, "frames like the training domain") {
		t.Fatalf("in domain: %v %q", ok, detail)
	}
	i := 1
	for ; i <= 10; i++ {
		m.observe(at(i), 5)
	}
	if ok, detail := c.domainHealth(); !ok || !strings.Contains(detail, "domain shift: distance") {
		t.Fatalf("shifted for 1 s: %v %q", ok, detail)
	}
	for ; i <= 25; i++ {
		m.observe(at(i), 5)
	}
	ok, detail := c.domainHealth()
	if ok || !strings.HasPrefix(detail, DomainDegradedReason) {
		t.Fatalf("shifted for 2.5 s (persistence 2 s): %v %q", ok, detail)
	}
	if s := c.domainStatus(); !s.Shifted || !s.Persistent || s.Shifts != 1 || s.Threshold != 1 || s.WindowS != 1 {
		t.Errorf("status %+v", s)
	}
	for j := 0; j < 20; j++ {
		m.observe(at(i+j), 0.5)
	}
	if ok, _ := c.domainHealth(); !ok || c.domainStatus().Shifted {
		t.Errorf("back in the domain: still degraded or shifted (%+v)", c.domainStatus())
	}
}

// TestProcessWithDomainMonitorAllocatesNothing: the frame path with the
// camera's domain monitor on (statistics, distance, window, the engine's
// domain step; no shift: the threshold is out of reach) allocates nothing.
func TestProcessWithDomainMonitorAllocatesNothing(t *testing.T) {
	p := newIdlePipeline(t, "quiet.yaml")
	l := infer.DomainLayout(p.cfg.ModelsConfig().AuxUESpec)
	rng := rand.New(rand.NewPCG(2, 2))
	frames := make([][]float64, 20)
	for i := range frames {
		frames[i] = make([]float64, l.Dim())
		for j := range frames[i] {
			frames[i][j] = rng.NormFloat64()
		}
	}
	rec, err := domain.Fit(l, frames, domain.FitOptions{Statistic: domain.KNN})
	if err != nil {
		t.Fatal(err)
	}
	c := p.cams[0]
	if c.dom, err = newDomainMonitor(rec, runconfig.DomainConfig{Window: time.Second, Threshold: runconfig.DomainThreshold{Value: 1e9},
		FalseAlarmRate: 0.01}, c.engine.Calibration()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f := testFrame(testW, testH)
	c.process(ctx, f) // warm-up
	allocs := math.Inf(1)
	for range 3 {
		allocs = min(allocs, testing.AllocsPerRun(20, func() {
			f.Seq++
			f.Capture = time.Now()
			c.process(ctx, f)
		}))
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per frame with the domain monitor, want 0", allocs)
	}
	s := c.domainStatus()
	if !s.On || !(s.Distance > 0) || s.Distance >= math.MaxFloat32 || c.dom.errs.Load() != 0 || s.Shifted {
		t.Fatalf("monitor status %+v, %d frames not measured", s, c.dom.errs.Load())
	}
}

// TestDomainMonitorStopsWithoutDeviceFeatures: a record that pools the
// depth model's features, on frames whose tensor stayed on the device
// (nil), stops the monitor instead of counting every frame as foreign.
func TestDomainMonitorStopsWithoutDeviceFeatures(t *testing.T) {
	p := newIdlePipeline(t, "quiet.yaml")
	l := domain.DefaultLayout(true)
	rng := rand.New(rand.NewPCG(3, 3))
	frames := make([][]float64, 20)
	for i := range frames {
		frames[i] = make([]float64, l.Dim())
		for j := range frames[i] {
			frames[i][j] = rng.NormFloat64()
		}
	}
	rec, err := domain.Fit(l, frames, domain.FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := p.cams[0]
	if c.dom, err = newDomainMonitor(rec, runconfig.DomainConfig{Window: time.Second, FalseAlarmRate: 0.01}, c.engine.Calibration()); err != nil {
		t.Fatal(err)
	}
	c.process(context.Background(), testFrame(testW, testH))
	if s := c.domainStatus(); s.On || s.Shifted || c.engine.DomainShifted() {
		t.Fatalf("status %+v, engine shifted %v: want the monitor off, no shift", s, c.engine.DomainShifted())
	}
	if ok, detail := c.domainHealth(); !ok || detail != "domain monitor off" {
		t.Errorf("health %v %q", ok, detail)
	}
}
