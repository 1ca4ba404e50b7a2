package domain

import (
	"fmt"
	"math"
	"time"
)

// MonitorConfig sets how a camera's frame distances become a shift.
type MonitorConfig struct {
	// Window: the smoothed distance is the mean of the distances of the
	// frames captured within the last Window (at most MonitorCapacity
	// frames). A sustained change from in-domain distances d0 to d1
	// crosses a threshold t (d0 < t < d1) after the fraction
	// (t - d0) / (d1 - d0) of the window, never later than Window.
	Window time.Duration
	// Threshold on the smoothed distance (> 0).
	Threshold float64
	// Persistence: a shift that lasted this long makes Reading.Persistent
	// (the camera's degraded health); 0 never.
	Persistence time.Duration
}

// Validate checks the config; errors name the domain: keys.
func (c MonitorConfig) Validate() error {
	switch {
	case c.Window <= 0 || c.Window > 10*time.Minute:
		return fmt.Errorf("domain.window: %v, want (0, 10m]", c.Window)
	case !(c.Threshold > 0) || math.IsInf(c.Threshold, 0):
		return fmt.Errorf("domain.threshold: %v, want > 0", c.Threshold)
	case c.Persistence < 0 || c.Persistence > 24*time.Hour:
		return fmt.Errorf("domain.persistence: %v, want [0, 24h]", c.Persistence)
	}
	return nil
}

// MonitorCapacity bounds the frames the window's mean is taken over (the
// newest ones): 1024 = 68 s at 15 fps.
const MonitorCapacity = 1024

// Release: a shift ends when the smoothed distance falls below Release x
// Threshold, so that a distance hovering at the threshold is one episode,
// not a flap per frame.
const Release = 0.9

// Transition is what a frame did to the monitor's shift.
type Transition uint8

// Transitions.
const (
	Steady Transition = iota
	Began             // the smoothed distance rose above the threshold
	Ended             // it fell below Release x Threshold
)

// Reading is the monitor's state after a frame.
type Reading struct {
	Distance  float64 // the frame's
	Smoothed  float64 // the window's mean
	Threshold float64
	Window    time.Duration
	Shifted   bool
	// Since is when the current shift began (zero when none).
	Since time.Time
	// Persistent: the shift has lasted Persistence.
	Persistent bool
	Transition Transition
}

type sample struct {
	t time.Time
	v float64
}

// Monitor smooths and thresholds one camera's frame distances. It is used
// from one goroutine and allocates nothing per frame.
type Monitor struct {
	cfg     MonitorConfig
	ring    [MonitorCapacity]sample
	head, n int // oldest sample, live samples
	shifted bool
	since   time.Time
	last    Reading
}

// NewMonitor returns a monitor with config c.
func NewMonitor(c MonitorConfig) (*Monitor, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Monitor{cfg: c}, nil
}

// Config is the monitor's config.
func (m *Monitor) Config() MonitorConfig { return m.cfg }

// SetConfig replaces the config (a reload), keeping the window's frames
// and the shift state.
func (m *Monitor) SetConfig(c MonitorConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	m.cfg = c
	return nil
}

// Reset forgets the window and ends a shift without a transition (a
// camera restarted, the models changed).
func (m *Monitor) Reset() {
	m.head, m.n, m.shifted, m.since, m.last = 0, 0, false, time.Time{}, Reading{}
}

// Last is the reading of the last frame.
func (m *Monitor) Last() Reading { return m.last }

// Observe adds the distance of the frame captured at t (non-decreasing
// across calls; a non-finite distance counts as the largest finite one so
// that a broken frame cannot hide a shift) and returns the reading.
func (m *Monitor) Observe(t time.Time, distance float64) Reading {
	if math.IsNaN(distance) || math.IsInf(distance, 0) {
		distance = math.MaxFloat32
	}
	// Drop samples older than the window, then append (overwriting the
	// oldest when full).
	for m.n > 0 && t.Sub(m.ring[m.head].t) >= m.cfg.Window {
		m.head = (m.head + 1) % MonitorCapacity
		m.n--
	}
	if m.n == MonitorCapacity {
		m.head = (m.head + 1) % MonitorCapacity
		m.n--
	}
	m.ring[(m.head+m.n)%MonitorCapacity] = sample{t: t, v: distance}
	m.n++
	var s float64
	for i := range m.n {
		s += m.ring[(m.head+i)%MonitorCapacity].v
	}
	mean := s / float64(m.n)
	r := Reading{Distance: distance, Smoothed: mean, Threshold: m.cfg.Threshold, Window: m.cfg.Window}
	switch {
	case !m.shifted && mean > m.cfg.Threshold:
		m.shifted, m.since = true, t
		r.Transition = Began
	case m.shifted && mean < Release*m.cfg.Threshold:
		m.shifted, m.since = false, time.Time{}
		r.Transition = Ended
	}
	r.Shifted, r.Since = m.shifted, m.since
	r.Persistent = m.shifted && m.cfg.Persistence > 0 && t.Sub(m.since) >= m.cfg.Persistence
	m.last = r
	return r
}
