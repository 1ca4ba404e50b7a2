package alerts

import (
	"fmt"
	"math"
	"time"
)

// Timing sets how a zone's risk signals are fused over time and how its
// level and episodes follow them. Every value is a duration measured on
// the frames' capture times, so the behaviour does not depend on the
// frame rate.
type Timing struct {
	// FusionTimeConstant tau of the exponential moving average applied to
	// each risk signal of a zone: y += a (x - y) with a = 1 - exp(-dt/tau),
	// dt the capture time since the previous frame. A step from 0 to x
	// reaches a threshold t < x after tau ln(x/(x-t)); 0 disables fusion.
	FusionTimeConstant time.Duration
	// EnterInertia: the fused signals must ask for a higher level for this
	// long (first frame to last) before the zone takes it; 0 raises on the
	// first frame. It applies to warn; CriticalEnterInertia to critical:
	// strong evidence may enter sooner than weak evidence.
	EnterInertia time.Duration
	// CriticalEnterInertia: the same for the critical level.
	CriticalEnterInertia time.Duration
	// ExitInertia: the fused signals must ask for a lower level for this
	// long before the zone lowers.
	ExitInertia time.Duration
	// MinEpisode: an episode is not lowered to ok before it lasted this long.
	MinEpisode time.Duration
	// MergeWindow: a zone back at ok keeps its episode open this long; a
	// return within it continues the episode (same id, an update event)
	// and only after it does the end event go out. Within the window a
	// return needs only the exit thresholds (the level the criteria's
	// hysteresis would still hold) for the entry inertia: a signal that
	// dips below its band and comes back into it is one episode.
	MergeWindow time.Duration
}

// Validate checks that no duration is negative; path prefixes key names.
func (t Timing) Validate(path string) error {
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"fusion_time_constant", t.FusionTimeConstant}, {"enter_inertia", t.EnterInertia},
		{"critical_enter_inertia", t.CriticalEnterInertia}, {"exit_inertia", t.ExitInertia},
		{"min_episode", t.MinEpisode}, {"merge_window", t.MergeWindow}} {
		if d.v < 0 {
			return fmt.Errorf("%s: %v is negative", joinPath(path, d.key), d.v)
		}
		if d.v > time.Hour {
			return fmt.Errorf("%s: %v is above 1h", joinPath(path, d.key), d.v)
		}
	}
	return nil
}

// ema is a frame-rate independent exponential moving average.
type ema struct {
	value  float64
	primed bool
}

// add feeds x observed dt after the previous sample; the first sample
// sets the value.
func (f *ema) add(x float64, dt, tau time.Duration) float64 {
	if !f.primed || tau <= 0 {
		f.value, f.primed = x, true
		return x
	}
	if dt > 0 {
		a := -math.Expm1(-dt.Seconds() / tau.Seconds()) // 1 - exp(-dt/tau), exact for small dt
		f.value += a * (x - f.value)
	}
	return f.value
}

// transition is what one frame did to a zone's episode.
type transition uint8

const (
	stay     transition = iota
	opened              // left ok: a new episode
	reopened            // left ok within the merge window: the episode continues
	changed             // level changed within the episode
	lowered             // back at ok; the episode waits out the merge window
	closed              // the episode ended
)

// tracker is one zone's level and episode state machine. Its input per
// frame is the capture time and the target level (the highest level the
// fused criteria ask for, after their enter/exit hysteresis).
type tracker struct {
	level Level
	since time.Time // when level was taken
	// upSince/downSince: first frame of the current run of frames whose
	// target is above/below level (zero: no such run).
	upSince, downSince time.Time

	open         bool      // an episode is open (possibly closing)
	closing      bool      // level ok, waiting out the merge window
	closingSince time.Time // when the level went back to ok
	start        time.Time // episode start
	lastRaised   Level     // the level before the return to ok (for the end event)
}

// step applies one frame: target is the level the criteria ask for,
// hold the level their hysteresis would keep from the top (every value
// above its exit threshold). It returns what happened and the level before.
func (k *tracker) step(t time.Time, target, hold Level, tm Timing) (transition, Level) {
	prev := k.level
	out := stay
	inWindow := k.closing && k.level == LevelOK && hold > LevelOK
	if inWindow {
		target = max(target, hold)
	}
	switch {
	case target > k.level:
		k.downSince = time.Time{}
		if k.upSince.IsZero() {
			k.upSince = t
		}
		need := tm.EnterInertia
		if target == LevelCritical {
			need = tm.CriticalEnterInertia
		}

		if t.Sub(k.upSince) >= need {
			k.level, k.since, k.upSince = target, t, time.Time{}
			switch {
			case prev > LevelOK:
				out = changed
			case k.closing:
				k.closing = false
				out = reopened
			default:
				k.open, k.start = true, t
				out = opened
			}
		}
	case target < k.level:
		k.upSince = time.Time{}
		if k.downSince.IsZero() {
			k.downSince = t
		}
		if t.Sub(k.downSince) >= tm.ExitInertia && (target > LevelOK || t.Sub(k.start) >= tm.MinEpisode) {
			k.level, k.since, k.downSince = target, t, time.Time{}
			out = changed
			if target == LevelOK {
				k.closing, k.closingSince, k.lastRaised = true, t, prev
				out = lowered
			}
		}
	default:
		k.upSince, k.downSince = time.Time{}, time.Time{}
	}
	if k.closing && k.level == LevelOK && t.Sub(k.closingSince) >= tm.MergeWindow {
		k.closing, k.open = false, false
		out = closed
	}
	return out, prev
}

// end closes an open episode at once (reload, shutdown); it reports
// whether one was open and the level the end event names as previous.
func (k *tracker) end(t time.Time) (bool, Level) {
	if !k.open {
		return false, LevelOK
	}
	prev := k.level
	if k.closing {
		prev = k.lastRaised
	}
	*k = tracker{since: t}
	return true, prev
}

// String lists the durations with their config keys.
func (t Timing) String() string {
	return fmt.Sprintf("fusion_time_constant %v, enter_inertia %v, critical_enter_inertia %v, exit_inertia %v, min_episode %v, merge_window %v",
		t.FusionTimeConstant, t.EnterInertia, t.CriticalEnterInertia, t.ExitInertia, t.MinEpisode, t.MergeWindow)
}
