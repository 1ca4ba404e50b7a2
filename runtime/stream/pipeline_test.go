package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/testmodels"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/outbox"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// subscriber collects the alert events a real MQTT client receives.
type subscriber struct {
	client mqtt.Client
	mu     sync.Mutex
	events []alerts.Event
	recvAt []time.Time
}

func subscribe(t testing.TB, brokerAddr, topic string) *subscriber {
	t.Helper()
	s := &subscriber{}
	opts := mqtt.NewClientOptions().AddBroker("tcp://" + brokerAddr).SetClientID(fmt.Sprintf("test-sub-%d", time.Now().UnixNano())).
		SetCleanSession(true).SetConnectTimeout(5 * time.Second)
	s.client = mqtt.NewClient(opts)
	if tok := s.client.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscriber connect %s: %v", brokerAddr, tok.Error())
	}
	tok := s.client.Subscribe(topic, 1, func(_ mqtt.Client, m mqtt.Message) {
		now := time.Now()
		var ev alerts.Event
		if err := json.Unmarshal(m.Payload(), &ev); err != nil {
			t.Errorf("event payload %q: %v", m.Payload(), err)
			return
		}
		s.mu.Lock()
		s.events = append(s.events, ev)
		s.recvAt = append(s.recvAt, now)
		s.mu.Unlock()
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe %s: %v", topic, tok.Error())
	}
	t.Cleanup(func() { s.client.Disconnect(100) })
	return s
}

func (s *subscriber) snapshot() []alerts.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]alerts.Event(nil), s.events...)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func countEvents(evs []alerts.Event, typ alerts.EventType, level alerts.Level) map[string]int {
	out := map[string]int{}
	for _, e := range evs {
		if e.Type == typ && e.Level == level {
			out[e.Zone]++
		}
	}
	return out
}

// startPipeline builds and runs a pipeline on a synthetic camera; stop
// cancels it and returns Run's error.
func startPipeline(t *testing.T, s *testSetup, fps float64, onEvent func(*alerts.Event)) (p *Pipeline, src *synthSource, stop func() error) {
	t.Helper()
	requireORT(t)
	cfg, err := runconfig.Load(s.config)
	if err != nil {
		t.Fatal(err)
	}
	src = newSynthSource(testW, testH, fps)
	ctx, cancel := context.WithCancel(context.Background())
	p, err = New(ctx, cfg, Options{Source: src, OnEvent: onEvent})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	go src.run(ctx, 0)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(20 * time.Second):
				runErr = errors.New("Run did not return within 20 s of cancellation")
			}
		})
		return runErr
	}
	t.Cleanup(func() { stop() })
	return p, src, stop
}

// TestPipelineEndToEnd runs frames through both models into the alert
// engine, and checks that a real MQTT subscriber receives the critical
// events, that metrics moved, and that shutdown leaves the outbox empty.
func TestPipelineEndToEnd(t *testing.T) {
	s := newTestSetup(t, "alarm.yaml", testmodels.ConfigZones)
	var printed []string
	var mu sync.Mutex
	p, _, stop := startPipeline(t, s, 20, func(ev *alerts.Event) {
		mu.Lock()
		printed = append(printed, FormatEvent(ev))
		mu.Unlock()
	})
	sub := subscribe(t, p.BrokerAddr(), "didoedge/testcar/front/events")
	waitFor(t, 30*time.Second, "critical new events for both zones", func() bool {
		c := countEvents(sub.snapshot(), alerts.EventNew, alerts.LevelCritical)
		return c["r0c0"] == 1 && c["r0c1"] == 1
	})
	m := p.Metrics().Camera(0)
	if m.Frames.Load() == 0 || m.Stages[StageDepth].Count() == 0 || m.Stages[StageAuxUE].Count() == 0 || m.Latency.Count() == 0 {
		t.Fatalf("metrics did not move: frames %d depth %d auxue %d latency %d",
			m.Frames.Load(), m.Stages[StageDepth].Count(), m.Stages[StageAuxUE].Count(), m.Latency.Count())
	}
	if d, a := p.Providers(); d != "cpu" || a != "cpu" {
		t.Fatalf("providers %s, %s; want cpu", d, a)
	}
	// One camera at batch size 1: frames that arrive while the models are
	// idle are staged straight into the sessions' input (no copy).
	if n := p.cams[0].directN.Load(); n == 0 || !p.cams[0].direct {
		t.Fatalf("direct staging: enabled %v, %d frames staged directly of %d", p.cams[0].direct, n, m.Frames.Load())
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	if len(printed) < 2 || !strings.Contains(printed[0], "NEW") || !strings.Contains(printed[0], "critical") {
		t.Fatalf("printed event lines %q", printed)
	}
	mu.Unlock()
	// Every queued event was acknowledged before Run returned.
	box, err := outbox.Open(outbox.Options{Dir: filepath.Join(s.dir, "outbox"), MaxBytes: 64 << 20, MaxRecords: 100000, SegmentBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	if n := box.Stats().Pending; n != 0 {
		t.Fatalf("outbox holds %d unacknowledged events after shutdown", n)
	}
}

// TestReloadSwapsZonesAndEndsEpisodes reloads a config with other zones
// and a quiet calibration: the open critical episodes end, the new zones
// are in effect and raise nothing.
func TestReloadSwapsZonesAndEndsEpisodes(t *testing.T) {
	s := newTestSetup(t, "alarm.yaml", testmodels.ConfigZones)
	p, _, stop := startPipeline(t, s, 20, nil)
	sub := subscribe(t, p.BrokerAddr(), "didoedge/testcar/front/events")
	waitFor(t, 30*time.Second, "critical episodes", func() bool {
		return len(countEvents(sub.snapshot(), alerts.EventNew, alerts.LevelCritical)) == 2
	})
	s.write(t, "quiet.yaml", "  grid: {rows: 1, cols: 3}")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "end events of both episodes", func() bool {
		c := countEvents(sub.snapshot(), alerts.EventEnd, alerts.LevelOK)
		return c["r0c0"] == 1 && c["r0c1"] == 1
	})
	var zones int
	p.View(func(s *Snapshot) { zones = len(s.Zones) })
	if zones != 3 {
		t.Fatalf("after reload %d zones, want 3", zones)
	}
	if p.Metrics().Reloads.Load() != 1 {
		t.Fatalf("reloads = %d", p.Metrics().Reloads.Load())
	}
	// A bad file is refused and the running zones are kept.
	s.write(t, "missing-calibration.yaml", "  grid: {rows: 1, cols: 3}")
	err := p.Reload(ctx)
	testmodels.MustContain(t, err, "alerts.calibration", "missing-calibration.yaml")
	before := len(sub.snapshot())
	time.Sleep(500 * time.Millisecond)
	for _, ev := range sub.snapshot()[before:] {
		if ev.Type == alerts.EventNew {
			t.Fatalf("new event %+v after reloading a quiet calibration", ev)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// newIdlePipeline builds a pipeline that is not running, for driving
// process directly.
func newIdlePipeline(t testing.TB, calibration string) *Pipeline {
	t.Helper()
	requireORT(t)
	s := newTestSetup(t, calibration, testmodels.ConfigZones)
	cfg, err := runconfig.Load(s.config)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(context.Background(), cfg, Options{Source: camera.NewMailbox()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	// Let the publisher connect and publish its initial states: its
	// goroutines allocate, and AllocsPerRun counts the whole process.
	deadline := time.Now().Add(10 * time.Second)
	for !p.sink.connected() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	return p
}

func testFrame(w, h int) *camera.Frame {
	f := &camera.Frame{Width: w, Height: h, RGB: make([]uint8, 3*w*h), Capture: time.Now()}
	for i := range f.RGB {
		f.RGB[i] = uint8(i * 13)
	}
	return f
}

// TestProcessAllocatesNothing: the steady-state frame path (resize,
// normalize, both models, read-outs, assessment without events) allocates
// nothing, also while a debug client watches.
func TestProcessAllocatesNothing(t *testing.T) {
	p := newIdlePipeline(t, "quiet.yaml")
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		w, h     int
		watching bool
	}{
		{"model size", testW, testH, false},
		{"resized 2x", 2 * testW, 2 * testH, false},
		{"watched", testW, testH, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := testFrame(tc.w, tc.h)
			p.cams[0].process(ctx, f) // warm-up: resize taps, first session runs
			if tc.watching {
				p.Watch()
				p.cams[0].lastSnap = time.Time{}
			}
			// Other goroutines (broker, MQTT client) can only add to the
			// process-wide count, so the least of three runs is the frame's.
			allocs := math.Inf(1)
			for range 3 {
				allocs = min(allocs, testing.AllocsPerRun(20, func() {
					f.Seq++
					f.Capture = time.Now()
					if tc.watching {
						p.cams[0].lastSnap = time.Time{} // snapshot on every frame
					}
					p.cams[0].process(ctx, f)
				}))
			}
			if allocs != 0 {
				t.Fatalf("%v allocations per frame, want 0", allocs)
			}
			if p.Metrics().Camera(0).Errors.Load() != 0 {
				t.Fatalf("%d frame errors", p.Metrics().Camera(0).Errors.Load())
			}
		})
	}
	var seq uint64
	p.View(func(s *Snapshot) { seq = s.Seq })
	if seq == 0 {
		t.Fatal("the watched frames never reached the snapshot")
	}
}

// TestDroppedFramesCounted: sequence gaps are frames the camera produced
// and the pipeline never took.
func TestDroppedFramesCounted(t *testing.T) {
	p := newIdlePipeline(t, "quiet.yaml")
	f := testFrame(testW, testH)
	for _, seq := range []uint64{1, 2, 5, 6, 10} {
		f.Seq = seq
		p.cams[0].process(context.Background(), f)
	}
	if got := p.Metrics().Camera(0).Dropped.Load(); got != 2+3 {
		t.Fatalf("dropped = %d, want 5", got)
	}
	if got := p.Metrics().Camera(0).Frames.Load(); got != 5 {
		t.Fatalf("frames = %d, want 5", got)
	}
}

// TestWrongFrameIsAnError: a frame whose buffer does not hold its declared
// size fails that frame with a counted error, without a panic.
func TestWrongFrameIsAnError(t *testing.T) {
	p := newIdlePipeline(t, "quiet.yaml")
	f := testFrame(testW, testH)
	f.Width = 2 * testW
	p.cams[0].process(context.Background(), f)
	if p.Metrics().Camera(0).Errors.Load() != 1 || p.Metrics().Camera(0).Frames.Load() != 0 {
		t.Fatalf("errors %d frames %d, want 1 and 0", p.Metrics().Camera(0).Errors.Load(), p.Metrics().Camera(0).Frames.Load())
	}
}

// BenchmarkProcess measures one frame through every stage (test models,
// 32x64) and reports allocations; the model runs dominate.
func BenchmarkProcess(b *testing.B) {
	p := newIdlePipeline(b, "quiet.yaml")
	f := testFrame(testW, testH)
	ctx := context.Background()
	p.cams[0].process(ctx, f)
	debug.FreeOSMemory()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		f.Seq++
		p.cams[0].process(ctx, f)
	}
	m := p.Metrics().Camera(0)
	b.ReportMetric(float64((m.Stages[StageDepth].Mean() + m.Stages[StageAuxUE].Mean()).Microseconds()), "infer-us/op")
}
