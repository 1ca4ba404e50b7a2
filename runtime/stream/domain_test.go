package stream

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/internal/testmodels"
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

// TestDomainKeysReload: a reload (the file re-read as SIGHUP does, then
// applied) changes domain.window, false_alarm_rate, persistence and
// threshold on the running monitor, and a calibrated threshold follows the
// calibration file's new domain_threshold; the window's frames are kept
// (a threshold raised above their mean ends the shift on the next frame).
// domain.off is refused with a message naming the key, and nothing changes.
func TestDomainKeysReload(t *testing.T) {
	requireORT(t)
	s := newTestSetup(t, "quiet.yaml", testmodels.ConfigZones)
	base, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	load := func(domainSection, calibration string) *runconfig.Config {
		t.Helper()
		text := strings.Replace(string(base), "calibration: quiet.yaml", "calibration: "+calibration, 1) + domainSection
		if err := os.WriteFile(s.config, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := runconfig.Load(s.config)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if err := os.WriteFile(filepath.Join(s.dir, "dt.yaml"), []byte(testmodels.QuietCalibration+"domain_threshold: 2.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := load("", "quiet.yaml")
	p, err := New(context.Background(), cfg, Options{Source: camera.NewMailbox()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	// The test models carry no record: give the camera a monitor on one,
	// as New does for an AuxUE that has one.
	rec := testRecord(t)
	c := p.cams[0]
	if c.dom, err = newDomainMonitor(rec, cfg.Domain, c.engine.Calibration()); err != nil {
		t.Fatal(err)
	}
	at1, _ := rec.Threshold(0.01)
	at5, _ := rec.Threshold(0.05)
	if at1 == at5 {
		t.Fatalf("the record's thresholds at 1 %% and 5 %% are equal (%v): the test cannot tell them apart", at1)
	}
	t0 := time.Now()
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 100 * time.Millisecond) }
	for i := range 10 {
		c.dom.observe(at(i), 5)
	}
	if st := c.domainStatus(); !st.Shifted || st.Threshold != at1 || st.WindowS != 1 {
		t.Fatalf("before the reload: %+v, want shifted at the record's 1 %% threshold %v over 1 s", st, at1)
	}
	apply := func(cfg *runconfig.Config) error {
		t.Helper()
		return p.apply(cfg, nil) // the scheduler's side of Apply; no camera is added or removed
	}
	check := func(what string, thr, window float64, persistence time.Duration, source string) {
		t.Helper()
		st := c.domainStatus()
		if st.Threshold != thr || st.WindowS != window || c.dom.mon.Config().Persistence != persistence || !strings.Contains(c.dom.source, source) {
			t.Errorf("%s: threshold %v over %v s, persistence %v, from %q; want %v over %v s, %v, from %s", what,
				st.Threshold, st.WindowS, c.dom.mon.Config().Persistence, c.dom.source, thr, window, persistence, source)
		}
	}

	next := load("domain: {window: 3s, false_alarm_rate: 0.05, persistence: 10s}\n", "quiet.yaml")
	if err := apply(next); err != nil {
		t.Fatal(err)
	}
	check("window, false_alarm_rate, persistence", at5, 3, 10*time.Second, "false_alarm_rate 0.05")
	if p.Config() != next {
		t.Error("Config() is not the reloaded configuration")
	}

	if err := apply(load("domain: {window: 3s, persistence: 10s}\n", "dt.yaml")); err != nil {
		t.Fatal(err)
	}
	check("calibrated threshold", 2.5, 3, 10*time.Second, "calibration domain_threshold")

	if err := apply(load("domain: {window: 3s, threshold: 9, persistence: 0s}\n", "dt.yaml")); err != nil {
		t.Fatal(err)
	}
	check("threshold number", 9, 3, 0, "domain.threshold")
	// The window kept its ten frames at 5: their mean is below the release
	// level 0.9 x 9 = 8.1, so the next frame ends the shift.
	if r := c.dom.observe(at(10), 5); r.Transition != domain.Ended || r.Smoothed != 5 || r.Shifted {
		t.Errorf("first frame after raising the threshold to 9: %+v, want the shift ended at mean 5", r)
	}

	applied := p.Config()
	err = apply(load("domain: {off: true, window: 3s, threshold: 9, persistence: 0s}\n", "dt.yaml"))
	testmodels.MustContain(t, err, "domain.off", "restart")
	if p.Config() != applied {
		t.Error("a refused reload replaced Config()")
	}
	check("after the refused domain.off", 9, 3, 0, "domain.threshold")
}
