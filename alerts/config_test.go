package alerts

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadExampleConfig(t *testing.T) {
	path := filepath.Join("..", "configs", "alerts-example.yaml")
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Vehicle != "van-07" || c.Camera != "front" || len(c.Zones) != 3 || c.Grid.Cols != 4 ||
		c.Events.Timing() != DefaultTiming() || c.MQTT.InFlight != 16 || len(c.Embedded.Users) != 1 {
		t.Fatalf("config %+v", c)
	}
	if !filepath.IsAbs(c.Calibration) && !strings.HasPrefix(c.Calibration, filepath.Join("..", "configs")) {
		t.Fatalf("calibration path %q not resolved next to the config", c.Calibration)
	}
	spec, err := c.EngineSpec("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewEngine(spec, nil); err != nil {
		t.Fatal(err)
	}
	if got := c.Topics().ZoneState("front", "ego_lane_near"); got != "didoedge/van-07/front/zones/ego_lane_near/state" {
		t.Fatalf("topic %q", got)
	}
}

func TestParseConfigErrorsNameKey(t *testing.T) {
	base := "vehicle: v1\ncamera: front\ngrid: {rows: 1, cols: 1}\noutbox: {dir: /tmp/x}\n"
	tests := []struct{ name, extra, want string }{
		{"unknown", "colour: red\n", "a.yaml: colour: unknown key"},
		{"unknown nested", "mqtt: {brokr: x}\n", "a.yaml: mqtt.brokr: unknown key"},
		{"broker", "mqtt: {broker: 'http://x'}\n", "a.yaml: mqtt.broker:"},
		{"stats qos", "mqtt: {stats_qos: 2}\n", "a.yaml: mqtt.stats_qos: 2, want 0 or 1"},
		{"duration type", "events: {exit_inertia: soon}\n", "a.yaml: events.exit_inertia: cannot unmarshal"},
		{"negative", "events: {merge_window: -1s}\n", "a.yaml: events.merge_window: -1s is negative"},
		{"old inertia_frames", "events: {inertia_frames: 2}\n", "a.yaml: events.inertia_frames: removed: levels now follow time, not frame counts; use events.enter_inertia"},
		{"old min_hold", "events: {min_hold: 1s}\n", "a.yaml: events.min_hold: removed: use events.min_episode"},
		{"snapshot budget", "snapshots: {dir: /tmp/s, max_bytes: 1000}\n", "a.yaml: snapshots.max_bytes: 1000 below 1 MiB"},
		{"ha prefix", "homeassistant: {discovery: true, prefix: 'ha/#'}\n", "a.yaml: homeassistant.prefix:"},
		{"password without user", "mqtt: {password_env: X}\n", "a.yaml: mqtt.username: required with a password"},
		{"tls half", "mqtt: {tls: {cert: c.pem}}\n", "a.yaml: mqtt.tls.cert: cert and key go together"},
		{"embedded nobody", "mqtt: {broker: embedded}\n", "a.yaml: embedded.users: no users"},
		{"embedded user", "embedded: {users: [{username: u}]}\n", "a.yaml: embedded.users[0].password_file:"},
		{"segment", "outbox: {dir: /tmp/x, segment_bytes: 10}\n", "a.yaml: outbox.segment_bytes:"},
		{"zone", "zones: [{name: a, polygon: [[0,0]]}]\n", "a.yaml: zones[0].polygon: needs at least 3 points"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := base + tc.extra
			if strings.HasPrefix(tc.extra, "outbox:") {
				doc = strings.Replace(base, "outbox: {dir: /tmp/x}\n", "", 1) + tc.extra
			}
			_, err := ParseConfig("a.yaml", []byte(doc))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want prefix %q", err, tc.want)
			}
		})
	}
	for _, missing := range []struct{ doc, want string }{
		{"camera: front\ngrid: {rows: 1, cols: 1}\noutbox: {dir: /x}\n", "a.yaml: vehicle:"},
		{"vehicle: v\ncamera: front\ngrid: {rows: 1, cols: 1}\n", "a.yaml: outbox.dir: required"},
		{"vehicle: v\ncamera: fr-ont\ngrid: {rows: 1, cols: 1}\noutbox: {dir: /x}\n", "a.yaml: camera:"},
	} {
		if _, err := ParseConfig("a.yaml", []byte(missing.doc)); err == nil || !strings.HasPrefix(err.Error(), missing.want) {
			t.Errorf("error %v, want prefix %q", err, missing.want)
		}
	}
}

// FuzzParseConfig: any document is either rejected with an error naming
// the file or parses into a config that validates; never a panic.
func FuzzParseConfig(f *testing.F) {
	base := "vehicle: v1\ncamera: front\ngrid: {rows: 1, cols: 1}\noutbox: {dir: /tmp/x}\n"
	for _, extra := range []string{"", "events: {fusion_time_constant: 50ms, enter_inertia: 300ms, critical_enter_inertia: 0s}\n",
		"events: {exit_inertia: 200ms, min_episode: 1s, merge_window: 0s}\n", "events: {inertia_frames: 2, min_hold: 1s}\n",
		"snapshots: {dir: s, max_bytes: 2000000, quality: 90}\n", "homeassistant: {discovery: true, prefix: ha}\n"} {
		f.Add([]byte(base + extra))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig("f.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.yaml: ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed config does not validate: %v", err)
		}
		if err := c.Events.Timing().Validate("events"); err != nil {
			t.Fatalf("parsed timing does not validate: %v", err)
		}
	})
}
