package domain

import (
	"math"
	"testing"
	"time"
)

// TestMonitorStep: distances step from 1 to 5 and back at 10 fps; with a
// 1 s window (10 frames: a frame leaves when its age reaches the window)
// and threshold 2, the window's mean (10 - n + 5 n) / 10 exceeds 2 at
// n = 3 shifted frames (frame 32 for a switch at frame 30) and falls
// below Release x 2 = 1.8 when one shifted frame is left in the window
// (frame 98 for the switch back at 90).
func TestMonitorStep(t *testing.T) {
	m, err := NewMonitor(MonitorConfig{Window: time.Second, Threshold: 2, Persistence: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	dt := 100 * time.Millisecond
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * dt) }
	var began, ended []int
	persistentAt := -1
	for i := range 120 {
		d := 1.0
		if i >= 30 && i < 90 {
			d = 5
		}
		r := m.Observe(at(i), d)
		switch r.Transition {
		case Began:
			began = append(began, i)
		case Ended:
			ended = append(ended, i)
		}
		if r.Persistent && persistentAt < 0 {
			persistentAt = i
		}
		if r.Threshold != 2 || r.Window != time.Second || r.Distance != d {
			t.Fatalf("frame %d: reading %+v", i, r)
		}
	}
	if len(began) != 1 || began[0] != 32 {
		t.Errorf("began at %v, want [32]", began)
	}
	if len(ended) != 1 || ended[0] != 98 {
		t.Errorf("ended at %v, want [98]", ended)
	}
	if persistentAt != 52 {
		t.Errorf("persistent at frame %d, want 52 (2 s after the start)", persistentAt)
	}
}

func TestMonitorNonFiniteAndReset(t *testing.T) {
	m, _ := NewMonitor(MonitorConfig{Window: time.Second, Threshold: 2})
	r := m.Observe(time.Unix(1, 0), math.NaN())
	if !r.Shifted || r.Transition != Began {
		t.Errorf("a NaN distance did not shift: %+v", r)
	}
	m.Reset()
	if r := m.Observe(time.Unix(2, 0), 1); r.Shifted || r.Transition != Steady {
		t.Errorf("after reset: %+v", r)
	}
}

func TestMonitorConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  MonitorConfig
		want string
	}{
		{MonitorConfig{Threshold: 1}, "domain.window"},
		{MonitorConfig{Window: time.Second}, "domain.threshold"},
		{MonitorConfig{Window: time.Second, Threshold: math.Inf(1)}, "domain.threshold"},
		{MonitorConfig{Window: time.Second, Threshold: 1, Persistence: -1}, "domain.persistence"},
	} {
		if _, err := NewMonitor(c.cfg); err == nil || !contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one naming %s", c.cfg, err, c.want)
		}
	}
}

func TestMonitorAllocatesNothing(t *testing.T) {
	m, _ := NewMonitor(MonitorConfig{Window: 2 * time.Second, Threshold: 2})
	t0 := time.Unix(0, 0)
	i := 0
	if n := testing.AllocsPerRun(2000, func() {
		m.Observe(t0.Add(time.Duration(i)*time.Millisecond), 1)
		i++
	}); n != 0 {
		t.Errorf("Observe allocates %v times", n)
	}
}
