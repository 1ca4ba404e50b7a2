package mqttpub

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/schema"
)

// TestDiscoveryPayloadsValidate: every discovery config validates against
// the JSON Schema written from Home Assistant's documented keys, and a
// payload with an undocumented or mistyped key does not.
func TestDiscoveryPayloadsValidate(t *testing.T) {
	sch, err := schema.Load(schema.HomeAssistantDiscovery)
	if err != nil {
		t.Fatal(err)
	}
	cfg := HomeAssistantConfig{Discovery: true, Prefix: "homeassistant", StatusTopic: "homeassistant/status"}
	topics := alerts.Topics{Prefix: "didoedge", Vehicle: "van-07"}
	cs, err := DiscoveryConfigs(cfg, topics, "van-07", "front", []string{"ego_lane_near", "road_ahead"}, "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 6 {
		t.Fatalf("%d configs, want 3 per zone", len(cs))
	}
	topicRE := regexp.MustCompile(`^homeassistant/(binary_sensor|sensor)/didoedge_van-07/([a-zA-Z0-9_-]+)/config$`)
	unique := map[string]bool{}
	for _, c := range cs {
		if err := sch.Validate(c.Payload); err != nil {
			t.Errorf("%s: %v\n%s", c.Topic, err, c.Payload)
		}
		m := topicRE.FindStringSubmatch(c.Topic)
		if m == nil {
			t.Fatalf("topic %q is not <prefix>/<component>/<node_id>/<object_id>/config", c.Topic)
		}
		var p map[string]any
		if err := json.Unmarshal(c.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p["object_id"] != m[2] || unique[p["unique_id"].(string)] {
			t.Errorf("%s: object_id %v, unique_id %v (seen before: %v)", c.Topic, p["object_id"], p["unique_id"], unique[p["unique_id"].(string)])
		}
		unique[p["unique_id"].(string)] = true
		if p["availability_topic"] != "didoedge/van-07/availability" || p["payload_not_available"] != Offline ||
			!strings.HasPrefix(p["state_topic"].(string), "didoedge/van-07/front/zones/") {
			t.Errorf("%s: topics %v %v", c.Topic, p["availability_topic"], p["state_topic"])
		}
	}
	good := string(cs[0].Payload)
	for _, bad := range []struct{ from, to, want string }{
		{`"state_topic":`, `"stat_topic":`, `property "stat_topic" not allowed`},
		{`"qos":1`, `"qos":3`, "above maximum"},
		{`"qos":1`, `"qos":"1"`, "type string, want integer"},
		{`"device":{`, `"device":{"serial":"x",`, `property "serial" not allowed`},
		{`"object_id":"didoedge_van-07_front_ego_lane_near_risk"`, `"object_id":"a/b"`, "does not match"},
	} {
		doc := strings.Replace(good, bad.from, bad.to, 1)
		if doc == good {
			t.Fatalf("mutation %q did not apply", bad.from)
		}
		if err := sch.Validate([]byte(doc)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("mutated %q -> %q: error %v, want %q", bad.from, bad.to, err, bad.want)
		}
	}
}

// TestDiscoveryOverMQTT: with discovery on, the configs are retained on
// the broker, published again when Home Assistant's status topic says
// online, and those of a zone removed by a reload are cleared.
func TestDiscoveryOverMQTT(t *testing.T) {
	// Home Assistant publishes its birth message as a user of its own;
	// anonymous clients may only read (the alerts and the configs).
	dir := t.TempDir()
	passFile := filepath.Join(dir, "ha.pass")
	if err := os.WriteFile(passFile, []byte("ha-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`vehicle: van-1
camera: front
grid: {rows: 1, cols: 2}
homeassistant: {discovery: true}
mqtt: {broker: embedded, client_id: ha-test, stats_interval: 1h, close_timeout: 2s}
outbox: {dir: %q}
embedded:
  listen: "127.0.0.1:0"
  allow_anonymous: true
  users: [{username: homeassistant, password_file: %q, read: ["homeassistant/#", "didoedge/#"], write: [homeassistant/status]}]
`, filepath.Join(dir, "outbox"), passFile)
	cfg, err := parseTestSection("ha test", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := Start(context.Background(), cfg.Topics(), cfg.ServiceConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(context.Background())
	spec, err := cfg.EngineSpec("")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := alerts.NewEngine(spec, svc)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(svc.BrokerAddr(), ":")
	sub := startSubscriber(t, "-h", host, "-p", port, "-q", "1", "-t", "homeassistant/+/+/+/config")
	sch, err := schema.Load(schema.HomeAssistantDiscovery)
	if err != nil {
		t.Fatal(err)
	}
	sub.waitFor(t, 10*time.Second, "6 retained configs", func() bool { return len(sub.msgs) >= 6 })
	for _, m := range sub.messages() {
		if err := sch.Validate([]byte(m.payload)); err != nil {
			t.Errorf("%s: %v", m.topic, err)
		}
	}
	// Home Assistant's birth message: everything again.
	for !svc.Publisher().Connected() {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the subscription of the status topic is on its way
	if out, err := exec.Command(needTool(t, "mosquitto_pub"), "-h", host, "-p", port, "-u", "homeassistant", "-P", "ha-secret", "-t", "homeassistant/status", "-m", "online").CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_pub: %v %s", err, out)
	}
	sub.waitFor(t, 10*time.Second, "the configs again after the birth message", func() bool { return len(sub.msgs) >= 12 })
	// A reload to one zone clears the other zone's three entities.
	spec.Zones = spec.Zones[:1]
	if err := eng.Reload(spec, time.Now()); err != nil {
		t.Fatal(err)
	}
	sub.waitFor(t, 10*time.Second, "r0c1's configs cleared", func() bool {
		n := 0
		for _, m := range sub.msgs {
			if strings.Contains(m.topic, "_r0c1_") && m.payload == "(null)" {
				n++
			}
		}
		return n == 3
	})
}
