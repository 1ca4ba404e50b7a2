package alerts

import (
	"fmt"
	"math"
	"time"
)

// EventBound is the range of one events key: 0 where Zero says what it
// means, otherwise a duration in [Min, Max]. Below Min a value is no
// longer a timing but a load (a camera_stall of 1ns raises a camera fault
// every tick, an update_interval of 1ns an update every frame); above Max
// it is no timing either (an exit_inertia of 1e10 s never exits).
type EventBound struct {
	Key      string
	Min, Max time.Duration
	// Zero is what 0 means ("off", "immediate"); "" when 0 is refused.
	Zero string
}

// eventBounds is the one table of the events keys' bounds: the config
// (alerts.events, profiles.*.events), the control API, Foxglove's
// parameters and every other entry point check through it.
var eventBounds = []EventBound{
	{Key: "fusion_time_constant", Min: time.Millisecond, Max: time.Hour, Zero: "no fusion"},
	{Key: "enter_inertia", Min: time.Millisecond, Max: time.Hour, Zero: "immediate"},
	{Key: "critical_enter_inertia", Min: time.Millisecond, Max: time.Hour, Zero: "immediate"},
	{Key: "exit_inertia", Min: time.Millisecond, Max: time.Hour, Zero: "immediate"},
	{Key: "min_episode", Min: time.Millisecond, Max: time.Hour, Zero: "no minimum"},
	{Key: "merge_window", Min: time.Millisecond, Max: time.Hour, Zero: "no merging"},
	{Key: "update_interval", Min: time.Millisecond, Max: time.Hour, Zero: "off"}, // at most one update per frame anyway: 1 ms keeps the latency benchmark's update on every frame
	{Key: "camera_stall", Min: 500 * time.Millisecond, Max: time.Hour, Zero: "off"},
}

// EventBounds returns the bounds of every events key, in the table's
// order.
func EventBounds() []EventBound { return append([]EventBound(nil), eventBounds...) }

// EventBoundOf returns the bound of an events key; false for a key that
// is none.
func EventBoundOf(key string) (EventBound, bool) {
	for _, b := range eventBounds {
		if b.Key == key {
			return b, true
		}
	}
	return EventBound{}, false
}

// Check refuses d outside the bound; path names the key in the error
// ("alerts.events.camera_stall").
func (b EventBound) Check(path string, d time.Duration) error {
	switch {
	case d == 0 && b.Zero != "":
		return nil
	case d < 0:
		return fmt.Errorf("%s: %v is negative", path, d)
	case d < b.Min:
		return fmt.Errorf("%s: %v is below %v (0: %s)", path, d, b.Min, b.Zero)
	case d > b.Max:
		return fmt.Errorf("%s: %v is above %v", path, d, b.Max)
	}
	return nil
}

// Seconds converts a value in seconds (the control API's and Foxglove's
// unit) to a duration, checked against the bound before the conversion
// so that no value overflows into another (1e10 s is refused as above
// the bound, not turned into a negative duration).
func (b EventBound) Seconds(path string, s float64) (time.Duration, error) {
	switch {
	case math.IsNaN(s) || math.IsInf(s, 0):
		return 0, fmt.Errorf("%s: %v is not a number of seconds", path, s)
	case s < 0:
		return 0, fmt.Errorf("%s: %gs is negative", path, s)
	case s > b.Max.Seconds():
		return 0, fmt.Errorf("%s: %gs is above %v", path, s, b.Max)
	}
	d := time.Duration(math.Round(s * 1e9))
	if d == 0 && s > 0 {
		return 0, fmt.Errorf("%s: %gs is below %v (0: %s)", path, s, b.Min, b.Zero)
	}
	if err := b.Check(path, d); err != nil {
		return 0, err
	}
	return d, nil
}

// ValidateBounds checks every events key of e against the table; path
// prefixes the key names ("alerts.events").
func (e EventConfig) ValidateBounds(path string) error {
	t := e.Timing()
	for _, v := range []struct {
		key string
		d   time.Duration
	}{{"fusion_time_constant", t.FusionTimeConstant}, {"enter_inertia", t.EnterInertia},
		{"critical_enter_inertia", t.CriticalEnterInertia}, {"exit_inertia", t.ExitInertia},
		{"min_episode", t.MinEpisode}, {"merge_window", t.MergeWindow},
		{"update_interval", e.UpdateInterval}, {"camera_stall", e.CameraStall}} {
		b, _ := EventBoundOf(v.key)
		if err := b.Check(joinPath(path, v.key), v.d); err != nil {
			return err
		}
	}
	return nil
}
