package alerts

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestEventBounds: every key's edges, in the config's duration form and
// in the API's seconds, with the message naming the key and the bound.
func TestEventBounds(t *testing.T) {
	if len(eventBounds) != 8 {
		t.Fatalf("%d keys in the table, want the 8 events keys", len(eventBounds))
	}
	for _, b := range eventBounds {
		path := "alerts.events." + b.Key
		for _, c := range []struct {
			d   time.Duration
			err string
		}{
			{0, ""}, {b.Min, ""}, {b.Max, ""},
			{b.Min - time.Nanosecond, path + ": " + (b.Min - time.Nanosecond).String() + " is below " + b.Min.String()},
			{b.Max + time.Nanosecond, path + ": " + (b.Max + time.Nanosecond).String() + " is above " + b.Max.String()},
			{-time.Second, path + ": -1s is negative"},
		} {
			err := b.Check(path, c.d)
			if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
				t.Errorf("%s %v: %v, want %q", b.Key, c.d, err, c.err)
			}
		}
		for _, c := range []struct {
			s    float64
			want time.Duration
			err  string
		}{
			{0, 0, ""}, {b.Min.Seconds(), b.Min, ""}, {b.Max.Seconds(), b.Max, ""},
			{1e-12, 0, path + ": 1e-12s is below " + b.Min.String()},
			{1e-9, 0, path + ": 1ns is below " + b.Min.String()},
			{1e10, 0, path + ": 1e+10s is above 1h0m0s"},
			{math.MaxFloat64, 0, "is above 1h0m0s"},
			{-1, 0, path + ": -1s is negative"},
			{math.NaN(), 0, path + ": NaN is not a number of seconds"},
			{math.Inf(1), 0, "is not a number of seconds"},
		} {
			d, err := b.Seconds(path, c.s)
			if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) || d != c.want {
				t.Errorf("%s %g s: %v %v, want %v %q", b.Key, c.s, d, err, c.want, c.err)
			}
		}
	}
}

// TestEventConfigBounds: the config's validation uses the table (the
// defaults pass; each key out of its range is named).
func TestEventConfigBounds(t *testing.T) {
	if err := (EventConfig{CameraStall: 2 * time.Second}).ValidateBounds("events"); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	d := func(v time.Duration) *time.Duration { return &v }
	for _, c := range []struct {
		e   EventConfig
		err string
	}{
		{EventConfig{CameraStall: time.Nanosecond}, "events.camera_stall: 1ns is below 500ms (0: off)"},
		{EventConfig{UpdateInterval: time.Microsecond}, "events.update_interval: 1µs is below 1ms (0: off)"},
		{EventConfig{FusionTimeConstant: d(time.Nanosecond)}, "events.fusion_time_constant: 1ns is below 1ms (0: no fusion)"},
		{EventConfig{ExitInertia: d(2 * time.Hour)}, "events.exit_inertia: 2h0m0s is above 1h0m0s"},
		{EventConfig{MergeWindow: d(-time.Second)}, "events.merge_window: -1s is negative"},
	} {
		if err := c.e.ValidateBounds("events"); err == nil || err.Error() != c.err {
			t.Errorf("%+v: %v, want %q", c.e, err, c.err)
		}
	}
}
