package live

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/didoedge/didoedge/runtime/service/control"
)

// mqttClient is a paho client of the rig's embedded broker that keeps
// every message of its subscription.
type mqttClient struct {
	c    mqtt.Client
	mu   sync.Mutex
	msgs []mqtt.Message
}

func connectMQTT(t *testing.T, addr, user, pass string) *mqttClient {
	t.Helper()
	o := mqtt.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(fmt.Sprintf("test-%s-%d", user, time.Now().UnixNano())).
		SetCleanSession(true).SetConnectTimeout(5 * time.Second).SetAutoReconnect(false)
	if user != "" {
		o.SetUsername(user).SetPassword(pass)
	}
	m := &mqttClient{c: mqtt.NewClient(o)}
	if tok := m.c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("mqtt connect as %q: %v", user, tok.Error())
	}
	t.Cleanup(func() { m.c.Disconnect(100) })
	return m
}

func (m *mqttClient) subscribe(t *testing.T, filter string) {
	t.Helper()
	tok := m.c.Subscribe(filter, 1, func(_ mqtt.Client, msg mqtt.Message) {
		m.mu.Lock()
		m.msgs = append(m.msgs, msg)
		m.mu.Unlock()
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe %s: %v", filter, tok.Error())
	}
}

func (m *mqttClient) publish(t *testing.T, topic, payload string, retained bool) {
	t.Helper()
	tok := m.c.Publish(topic, 1, retained, payload)
	if !tok.WaitTimeout(10 * time.Second) {
		t.Fatalf("publish %s: no PUBACK", topic)
	}
}

// results returns the set results received so far.
func (m *mqttClient) results(t *testing.T) []control.SetResult {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []control.SetResult
	for _, msg := range m.msgs {
		var r control.SetResult
		if err := json.Unmarshal(msg.Payload(), &r); err != nil {
			t.Fatalf("result %s: %q: %v", msg.Topic(), msg.Payload(), err)
		}
		if msg.Topic() != r.Topic+"/result" {
			t.Fatalf("result on %s answers %s", msg.Topic(), r.Topic)
		}
		out = append(out, r)
	}
	return out
}

// waitResult waits for the n-th result (1-based).
func (m *mqttClient) waitResult(t *testing.T, n int) control.SetResult {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if rs := m.results(t); len(rs) >= n {
			return rs[n-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no result %d within 10 s", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer for a logger on other goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestMQTTSetTopics: with mqtt.set_topics, an embedded broker user with
// a write grant on the set topics changes a camera's zones and the
// profile, validated as the HTTP API validates (the result names the
// failing key with the API's status; nothing changes), each result on
// the set topic's /result. A user without the grant and an anonymous
// client cannot publish there (the broker's ACL), a retained set message
// is ignored, and a grant that reaches other topics under the prefix is
// refused when the file loads.
func TestMQTTSetTopics(t *testing.T) {
	t.Setenv("DIDOEDGE_TEST_OPERATOR", "operator-password-1")
	t.Setenv("DIDOEDGE_TEST_VIEWER", "viewer-password-1")
	users := `    users:
      - {username: operator, password_env: DIDOEDGE_TEST_OPERATOR, write: ["didoedge/v/+/zones/set", "didoedge/v/profile/set"]}
      - {username: viewer, password_env: DIDOEDGE_TEST_VIEWER}
`
	text := strings.Replace(twoCameras, "  mqtt: {broker: embedded, client_id: c}\n", "  mqtt: {broker: embedded, client_id: c, set_topics: true}\n", 1)
	text = strings.Replace(text, "  embedded: {listen: \"127.0.0.1:0\", allow_anonymous: true}\n",
		"  embedded:\n    listen: \"127.0.0.1:0\"\n    allow_anonymous: true\n"+users, 1)
	text = strings.Replace(text, "live: {listen: \"127.0.0.1:0\"}\n", "live: {listen: \"127.0.0.1:0\", control: false}\n", 1)
	r := startRig(t, text, 10)
	if err := r.ctl.ServeMQTT(t.Context(), r.p.MQTT()); err != nil {
		t.Fatal(err)
	}
	zonesOf(t, r, "left", "r0c0", "r0c1", "r0c2")
	addr := r.p.BrokerAddr()
	watch := connectMQTT(t, addr, "", "")
	watch.subscribe(t, "didoedge/v/#")
	op := connectMQTT(t, addr, "operator", "operator-password-1")
	const zonesSet = "didoedge/v/left/zones/set"
	results := connectMQTT(t, addr, "", "")
	results.subscribe(t, "didoedge/v/+/zones/set/result")
	results.subscribe(t, "didoedge/v/profile/set/result")

	// Live control is off (the API answers 403); the set topics work.
	if code, body := call(t, "PUT", "http://"+r.srv.Addr()+"/api/profile", `{"name": "night"}`, ""); code != 403 {
		t.Fatalf("PUT profile with live.control off: %d %s", code, body)
	}
	n := 0
	for _, c := range []struct {
		topic, payload string
		status         int
		msg            string
	}{
		{zonesSet, `{"zones": [{"name": "a", "polygon": [[0, 0], [1.5, 0], [1, 1]]}]}`, 422, "cameras[1].zones[0].polygon"},
		{zonesSet, `{"zones": [{"name": "a", "polygon": [[0, 0], [1, 0], [1, 1]]}], "colour": 1}`, 400, `unknown field "colour"`},
		{zonesSet, `{"zones": [`, 400, "payload:"},
		{"didoedge/v/rear/zones/set", `{"zones": [{"name": "a", "polygon": [[0, 0], [1, 0], [1, 1]]}]}`, 404, `no camera "rear"`},
		{"didoedge/v/profile/set", `{"name": "dusk"}`, 404, `profile: "dusk" is not one of profiles ([night])`},
		{"didoedge/v/profile/set", `{"name": "night"} {"name": ""}`, 400, "payload: trailing data after the JSON value"},
		{zonesSet, `{"zones": [{"name": "a", "polygon": [[0, 0], [0.5], [1, 1]]}]}`, 400, "polygon point [0.5]: want [x, y], two numbers, got 1"},
	} {
		op.publish(t, c.topic, c.payload, false)
		n++
		res := results.waitResult(t, n)
		if res.OK || res.Status != c.status || !strings.Contains(res.Error, c.msg) || res.Topic != c.topic {
			t.Errorf("%s %s: %+v, want %d naming %q", c.topic, c.payload, res, c.status, c.msg)
		}
	}
	zonesOf(t, r, "left", "r0c0", "r0c1", "r0c2")

	op.publish(t, zonesSet, `{"zones": [{"name": "kerb", "polygon": [[0, 0.5], [1, 0.5], [1, 1], [0, 1]]}]}`, false)
	n++
	if res := results.waitResult(t, n); !res.OK || res.Status != 200 || len(res.Cameras) != 2 || res.Cameras[1].Zones.Zones[0].Name != "kerb" {
		t.Fatalf("valid zones: %+v", res)
	}
	zonesOf(t, r, "left", "kerb")
	// The change is the operator's in the log, by MQTT user and client.
	var by []string
	for _, line := range strings.Split(r.logs.String(), "\n") {
		var rec struct{ Msg, By string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "live control: change applied" {
			by = append(by, rec.By)
		}
	}
	if len(by) != 1 || !strings.HasPrefix(by[0], `mqtt user "operator" (client "`) {
		t.Errorf("applied changes logged by %q, want the operator's MQTT user", by)
	}
	op.publish(t, "didoedge/v/profile/set", `{"name": "night"}`, false)
	n++
	if res := results.waitResult(t, n); !res.OK || res.Profile != "night" {
		t.Fatalf("profile night: %+v", res)
	}
	zonesOf(t, r, "front", "road")

	// Not allowed to publish there: a user without the grant, an
	// anonymous client. A retained set message from the operator is
	// ignored. Nothing changes, no result comes.
	viewer := connectMQTT(t, addr, "viewer", "viewer-password-1")
	viewer.publish(t, "didoedge/v/profile/set", `{"name": ""}`, false)
	anon := connectMQTT(t, addr, "", "")
	anon.publish(t, "didoedge/v/profile/set", `{"name": ""}`, false)
	op.publish(t, "didoedge/v/profile/set", `{"name": ""}`, true)
	time.Sleep(time.Second)
	if rs := results.results(t); len(rs) != n {
		t.Fatalf("results after refused publishes: %+v", rs[n:])
	}
	if active, _ := r.ctl.Profiles(); active != "night" {
		t.Fatalf("profile %q after refused publishes, want night", active)
	}
	zonesOf(t, r, "front", "road")
	if r.ctl.Applied() != 2 || r.ctl.Refused() != 4 {
		t.Errorf("applied %d refused %d, want 2 and 4 (the API's 403, three refused set messages reach the control)", r.ctl.Applied(), r.ctl.Refused())
	}
}
