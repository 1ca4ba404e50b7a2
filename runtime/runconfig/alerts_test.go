package runconfig

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/alerts"
)

func TestLoadAlertsExample(t *testing.T) {
	path := filepath.Join("..", "..", "configs", "alerts-example.yaml")
	c, err := LoadAlerts(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Vehicle != "van-07" || c.Camera != "front" || len(c.Zones) != 3 || c.Grid.Cols != 4 ||
		c.Events.Timing() != alerts.DefaultTiming() || c.MQTT.InFlight != 16 || len(c.Embedded.Users) != 1 {
		t.Fatalf("config %+v", c)
	}
	if !filepath.IsAbs(c.Calibration) && !strings.HasPrefix(c.Calibration, filepath.Join("..", "..", "configs")) {
		t.Fatalf("calibration path %q not resolved next to the config", c.Calibration)
	}
	spec, err := c.EngineSpec("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alerts.NewEngine(spec, nil); err != nil {
		t.Fatal(err)
	}
	if got := c.Topics().ZoneState("front", "ego_lane_near"); got != "didoedge/van-07/front/zones/ego_lane_near/state" {
		t.Fatalf("topic %q", got)
	}
}

func TestParseAlertsErrorsNameKey(t *testing.T) {
	base := "vehicle: v1\ncamera: front\ngrid: {rows: 1, cols: 1}\noutbox: {dir: /tmp/x}\n"
	tests := []struct{ name, extra, want string }{
		{"unknown", "colour: red\n", "a.yaml: colour: unknown key"},
		{"unknown nested", "mqtt: {brokr: x}\n", "a.yaml: mqtt.brokr: unknown key"},
		{"broker", "mqtt: {broker: 'http://x'}\n", "a.yaml: mqtt.broker:"},
		{"stats qos", "mqtt: {stats_qos: 2}\n", "a.yaml: mqtt.stats_qos: 2, want 0 or 1"},
		{"duration type", "events: {exit_inertia: soon}\n", "a.yaml: events.exit_inertia: cannot unmarshal"},
		{"negative", "events: {merge_window: -1s}\n", "a.yaml: events.merge_window: -1s is negative"},
		{"stall below its bound", "events: {camera_stall: 1ns}\n", "a.yaml: events.camera_stall: 1ns is below 500ms (0: off)"},
		{"update below its bound", "events: {update_interval: 1us}\n", "a.yaml: events.update_interval: 1µs is below 1ms (0: off)"},
		{"inertia above its bound", "events: {exit_inertia: 2h}\n", "a.yaml: events.exit_inertia: 2h0m0s is above 1h0m0s"},
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
		{"password in url", "mqtt: {broker: 'tcp://u:hunter2@host:1883'}\n", "a.yaml: mqtt.broker: \"tcp://***@host:1883\" carries credentials in the URL, which would end up in logs: give mqtt.username and mqtt.password_file"},
		{"broker without port", "mqtt: {broker: 'tcp://host'}\n", "a.yaml: mqtt.broker: \"tcp://host\": want scheme://host:port"},
		{"broker port", "mqtt: {broker: 'tcp://host:99999'}\n", "a.yaml: mqtt.broker: \"tcp://host:99999\": port \"99999\" is not a number in 1..65535"},
		{"embedded listen", "embedded: {listen: '127.0.0.1:http', allow_anonymous: true}\n", "a.yaml: embedded.listen: \"127.0.0.1:http\": port"},
		{"embedded listen host", "embedded: {listen: 'not a host:1883', allow_anonymous: true}\n", "a.yaml: embedded.listen:"},
		{"embedded listen off", "mqtt: {broker: embedded}\nembedded: {listen: 'off', allow_anonymous: true}\n", "a.yaml: embedded.listen: off, but the runtime's own client connects through it"},
		{"embedded tls", "embedded: {tls: {listen: '0.0.0.0:8883', cert: c.pem}}\n", "a.yaml: embedded.tls.cert: cert and key are required"},
		{"embedded tls listen", "embedded: {tls: {listen: '8883', cert: c.pem, key: k.pem}}\n", "a.yaml: embedded.tls.listen:"},
		{"reserved user", "embedded: {users: [{username: didoedge-runtime, password_env: X}]}\n", "a.yaml: embedded.users[0].username: \"didoedge-runtime\" is reserved"},
		{"bad grant", "embedded: {users: [{username: u, password_env: X, read: ['a/#/b']}]}\n", "a.yaml: embedded.users[0].read[0]: \"a/#/b\":"},
		{"write under prefix", "mqtt: {broker: embedded}\nembedded: {users: [{username: u, password_env: X, write: ['+/v1/#']}]}\n", "a.yaml: embedded.users[0].write[0]: \"+/v1/#\" reaches into topic_prefix \"didoedge\""},
		{"write everything", "mqtt: {broker: embedded}\nembedded: {users: [{username: u, password_env: X, write: ['#']}]}\n", "a.yaml: embedded.users[0].write[0]: \"#\" reaches into topic_prefix"},
		{"rate", "embedded: {message_rate: -1}\n", "a.yaml: embedded.message_rate:"},
		{"write a set topic and more", "mqtt: {broker: embedded}\nembedded: {users: [{username: u, password_env: X, write: ['didoedge/v1/+/zones/#']}]}\n", "a.yaml: embedded.users[0].write[0]: \"didoedge/v1/+/zones/#\" reaches into topic_prefix"},
		{"set topics unauthenticated", "mqtt: {broker: 'tcp://host:1883', set_topics: true}\n", "a.yaml: mqtt.set_topics: the connection to the external broker tcp://host:1883 is not authenticated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := base + tc.extra
			if strings.HasPrefix(tc.extra, "outbox:") {
				doc = strings.Replace(base, "outbox: {dir: /tmp/x}\n", "", 1) + tc.extra
			}
			_, err := ParseAlerts("a.yaml", []byte(doc))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want prefix %q", err, tc.want)
			}
		})
	}
	// A write grant outside the prefix is fine; with an external broker
	// (didoedge broker for another runtime) grants under it are too.
	for _, doc := range []string{
		base + "mqtt: {broker: embedded}\nembedded: {users: [{username: u, password_env: X, write: ['cmd/#']}]}\n",
		base + "embedded: {users: [{username: u, password_env: X, write: ['didoedge/#']}]}\n",
		// Set topics (mqtt.set_topics): a grant whose last level is "set".
		base + "mqtt: {broker: embedded, set_topics: true}\nembedded: {users: [{username: u, password_env: X, write: ['didoedge/v1/+/zones/set', 'didoedge/v1/profile/set']}]}\n",
	} {
		c, err := ParseAlerts("a.yaml", []byte(doc))
		if err != nil {
			t.Errorf("%q: %v", doc, err)
		} else if r := c.Embedded.Users[0].Read; len(r) != 1 || r[0] != "didoedge/#" {
			t.Errorf("default read grant %v, want [didoedge/#]", r)
		}
	}
	if _, err := ParseAlerts("a.yaml", []byte(base+"mqtt: {broker: 'tcp://host:1883', username: u, password_env: X, set_topics: true}\n")); err != nil {
		t.Errorf("set topics on an authenticated external broker: %v", err)
	}
	for _, missing := range []struct{ doc, want string }{
		{"camera: front\ngrid: {rows: 1, cols: 1}\noutbox: {dir: /x}\n", "a.yaml: vehicle:"},
		{"vehicle: v\ncamera: front\ngrid: {rows: 1, cols: 1}\n", "a.yaml: outbox.dir: required"},
		{"vehicle: v\ncamera: fr-ont\ngrid: {rows: 1, cols: 1}\noutbox: {dir: /x}\n", "a.yaml: camera:"},
	} {
		if _, err := ParseAlerts("a.yaml", []byte(missing.doc)); err == nil || !strings.HasPrefix(err.Error(), missing.want) {
			t.Errorf("error %v, want prefix %q", err, missing.want)
		}
	}
}

// FuzzParseAlerts: any alerts section is either rejected with an error naming
// the file or parses into a config that validates; never a panic.
func FuzzParseAlerts(f *testing.F) {
	base := "vehicle: v1\ncamera: front\ngrid: {rows: 1, cols: 1}\noutbox: {dir: /tmp/x}\n"
	for _, extra := range []string{"", "events: {fusion_time_constant: 50ms, enter_inertia: 300ms, critical_enter_inertia: 0s}\n",
		"events: {exit_inertia: 200ms, min_episode: 1s, merge_window: 0s}\n", "events: {inertia_frames: 2, min_hold: 1s}\n",
		"snapshots: {dir: s, max_bytes: 2000000, quality: 90}\n", "homeassistant: {discovery: true, prefix: ha}\n"} {
		f.Add([]byte(base + extra))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseAlerts("f.yaml", data)
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
