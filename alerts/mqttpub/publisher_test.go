package mqttpub

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/outbox"
	"github.com/didoedge/didoedge/alerts/schema"
)

func TestLastWillOfflineWhenPublisherDies(t *testing.T) {
	port := freePort(t)
	startMosquitto(t, port, "")
	topic := testTopics.Availability()
	sub := startSubscriber(t, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-q", "1", "-t", topic)
	h := startHelper(t, fmt.Sprintf("tcp://127.0.0.1:%d", port), t.TempDir(), 1, 1, 0)
	h.expect(t, "drained", 10*time.Second)
	sub.waitFor(t, 5*time.Second, "online", func() bool { return len(sub.msgs) > 0 })
	h.kill()
	sub.waitFor(t, 5*time.Second, "offline after the crash", func() bool {
		return len(sub.msgs) > 0 && sub.msgs[len(sub.msgs)-1].payload == Offline
	})
	av, err := schema.Load(schema.Availability)
	if err != nil {
		t.Fatal(err)
	}
	msgs := sub.messages()
	if msgs[0].payload != Online {
		t.Fatalf("first availability %q, want online", msgs[0].payload)
	}
	for _, m := range msgs {
		if err := av.Validate([]byte(strconv.Quote(m.payload))); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCloseKeepsUnacknowledgedEvents(t *testing.T) {
	dir := t.TempDir()
	box, err := outbox.Open(outbox.Options{Dir: dir, MaxBytes: 1 << 20, MaxRecords: 100, SegmentBytes: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing listens on this port.
	pub, err := Open(Options{Broker: fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t)), ClientID: "close-test",
		Topics: testTopics, RetryInterval: 100 * time.Millisecond}, box)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		ev := syntheticEvent(i)
		if seq, err := pub.Emit(&ev); err != nil || seq != uint64(i) || ev.Seq != uint64(i) {
			t.Fatalf("emit %d: seq %d (event %d) err %v", i, seq, ev.Seq, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	// A clean stop: the events are safe in the outbox (issue 29: a
	// SIGTERM while the broker is unreachable exits 0).
	if err = pub.Close(ctx); err != nil || pub.Kept() != 3 {
		t.Fatalf("close: %v, kept %d; want no error, 3 kept", err, pub.Kept())
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("close took %v with a 300ms deadline", el)
	}
	box.Close()
	box, err = outbox.Open(outbox.Options{Dir: dir, MaxBytes: 1 << 20, MaxRecords: 100, SegmentBytes: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	if n := box.Stats().Pending; n != 3 {
		t.Fatalf("%d pending after reopen, want 3", n)
	}
}

// writePEM writes a certificate or key in PEM.
func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// makeCerts writes ca.pem, server.pem/server-key.pem (for 127.0.0.1) and
// client.pem/client-key.pem, all signed by the CA.
func makeCerts(t *testing.T, dir string) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Now()
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "didoedge test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", caDER)
	for i, leaf := range []struct {
		name string
		ext  x509.ExtKeyUsage
		ips  []net.IP
	}{{"server", x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")}}, {"client", x509.ExtKeyUsageClientAuth, nil}} {
		k := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: leaf.name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{leaf.ext}, IPAddresses: leaf.ips}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		writePEM(t, filepath.Join(dir, leaf.name+".pem"), "CERTIFICATE", der)
		kder, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		writePEM(t, filepath.Join(dir, leaf.name+"-key.pem"), "PRIVATE KEY", kder)
	}
}

// TestTLSWithClientCertificateAndPassword: mosquitto with a TLS listener
// that requires a client certificate and a password; the publisher is
// configured from a YAML file (TLS files and password file relative to it).
func TestTLSWithClientCertificateAndPassword(t *testing.T) {
	dir := t.TempDir()
	makeCerts(t, dir)
	pw := filepath.Join(dir, "passwd")
	if out, err := exec.Command(needTool(t, "mosquitto_passwd"), "-b", "-c", pw, "veh", "s3cret").CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_passwd: %v %s", err, out)
	}
	port := freePort(t)
	startMosquitto(t, port, fmt.Sprintf("cafile %[1]s/ca.pem\ncertfile %[1]s/server.pem\nkeyfile %[1]s/server-key.pem\nrequire_certificate true\npassword_file %[2]s\nallow_anonymous false\n", dir, pw))
	topic := testTopics.Events("front")
	sub := startSubscriber(t, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "--cafile", filepath.Join(dir, "ca.pem"),
		"--cert", filepath.Join(dir, "client.pem"), "--key", filepath.Join(dir, "client-key.pem"),
		"-u", "veh", "-P", "s3cret", "-q", "1", "-t", topic)

	if err := os.WriteFile(filepath.Join(dir, "mqtt-password"), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "alerts.yaml")
	cfgText := fmt.Sprintf("vehicle: van-07\ncamera: front\ngrid: {rows: 1, cols: 1}\noutbox: {dir: outbox}\nmqtt:\n  broker: ssl://127.0.0.1:%d\n  client_id: tls-test\n  username: veh\n  password_file: mqtt-password\n  tls: {ca: ca.pem, cert: client.pem, key: client-key.pem}\n", port)
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadTestSection(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := PublisherOptions(cfg.MQTT, cfg.Topics(), nil)
	if err != nil {
		t.Fatal(err)
	}
	box, err := outbox.Open(cfg.Outbox.Options())
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	pub, err := Open(opts, box)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 20; i++ {
		ev := syntheticEvent(i)
		if _, err := pub.Emit(&ev); err != nil {
			t.Fatal(err)
		}
	}
	sub.waitFor(t, 10*time.Second, "20 events over TLS", func() bool { return len(sub.msgs) >= 20 })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := pub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	evs := decodeEvents(t, sub.messages(), topic)
	kept, _ := dedupe(evs)
	if len(kept) != 20 || kept[19].Seq != 20 {
		for _, ev := range evs {
			t.Logf("seq %d frame %d", ev.Seq, ev.FrameSeq)
		}
		t.Fatalf("%d events over TLS, want 20", len(kept))
	}

	// The same broker refuses a wrong password: nothing gets through.
	opts.Password = "wrong"
	opts.ClientID = "tls-test-wrong"
	box2, err := outbox.Open(outbox.Options{Dir: t.TempDir(), MaxBytes: 1 << 20, MaxRecords: 100, SegmentBytes: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer box2.Close()
	bad, err := Open(opts, box2)
	if err != nil {
		t.Fatal(err)
	}
	ev := syntheticEvent(1)
	bad.Emit(&ev)
	time.Sleep(1500 * time.Millisecond)
	if bad.Connected() || bad.Published() != 0 {
		t.Fatal("connected with a wrong password")
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	bad.Close(ctx2)
}

// TestEmbeddedBrokerEndToEnd runs the whole Service with the embedded
// broker: frames in, and mosquitto_sub sees events, retained states,
// stats and availability, each valid against its schema.
func TestEmbeddedBrokerEndToEnd(t *testing.T) {
	port := freePort(t)
	t.Setenv("TEST_EMBEDDED_PW", "pw-123")
	cfgText := fmt.Sprintf(`vehicle: van-07
camera: front
grid: {rows: 1, cols: 2}
events: {fusion_time_constant: 0s, exit_inertia: 0s, critical_enter_inertia: 0s, min_episode: 1s, merge_window: 0s, update_interval: 100ms}
outbox: {dir: %s}
mqtt: {broker: embedded, client_id: embedded-test, username: veh, password_env: TEST_EMBEDDED_PW, stats_interval: 100ms, stats_qos: 1}
embedded:
  listen: 127.0.0.1:%d
  users: [{username: veh, password_env: TEST_EMBEDDED_PW}]
`, t.TempDir(), port)
	cfg, err := parseTestSection("embedded.yaml", []byte(cfgText))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	svc, err := Start(ctx, cfg.Topics(), cfg.ServiceConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := cfg.EngineSpec("")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := alerts.NewEngine(spec, svc)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			svc.Close(ctx)
		}
	}()
	prefix := "didoedge/van-07/"
	sub := startSubscriber(t, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-u", "veh", "-P", "pw-123", "-q", "1", "-t", prefix+"#")

	// Anonymous clients and wrong passwords are refused.
	for _, args := range [][]string{{}, {"-u", "veh", "-P", "nope"}} {
		cmd := exec.Command(needTool(t, "mosquitto_sub"), append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(port), "-t", "#", "-C", "1", "-W", "2"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(strings.ToLower(string(out)), "not authori") {
			t.Fatalf("mosquitto_sub %v: err %v, output %q", args, err, out)
		}
	}

	m := alerts.Maps{Width: 8, Height: 4, Epistemic: make([]float32, 32), Scale: make([]float32, 32), Depth: make([]float32, 32)}
	now := time.Now()
	for i, ks := range []float32{0.1, 0.9, 0.9, 0.9, 0.1, 0.1, 0.1} {
		for p := range m.Depth {
			m.Epistemic[p], m.Depth[p], m.Scale[p] = ks, 20, 0.5
		}
		now = now.Add(200 * time.Millisecond)
		// Only the left half sees the unknown object.
		for y := 0; y < 4; y++ {
			for x := 4; x < 8; x++ {
				m.Epistemic[y*8+x] = 0.1
			}
		}
		if err := eng.Observe(alerts.Frame{Seq: uint64(i), Capture: now, Camera: "front"}, m); err != nil {
			t.Fatal(err)
		}
		if err := eng.Tick(now); err != nil {
			t.Fatal(err)
		}
	}
	count := func(topic string) int {
		n := 0
		for _, msg := range sub.msgs {
			if msg.topic == topic {
				n++
			}
		}
		return n
	}
	sub.waitFor(t, 10*time.Second, "events, states and stats", func() bool {
		return count(prefix+"front/events") >= 3 && count(prefix+"front/zones/r0c0/state") >= 3 && count(prefix+"front/stats") >= 1 && count(prefix+"availability") >= 1
	})
	// A late subscriber gets the retained state of both zones. It listens
	// for 2 s rather than for 2 messages: on a loaded machine the
	// publisher may still be flushing the last states, so a live state of
	// one zone can come before the other zone's retained one (mosquitto_sub
	// exits 27 at its -W timeout).
	out, err := exec.Command(needTool(t, "mosquitto_sub"), "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-u", "veh", "-P", "pw-123",
		"-t", prefix+"front/zones/+/state", "-v", "-W", "2").CombinedOutput()
	if !strings.Contains(string(out), prefix+"front/zones/r0c0/state {") || !strings.Contains(string(out), prefix+"front/zones/r0c1/state {") {
		t.Fatalf("retained states: %v\n%s", err, out)
	}
	// A listed subscriber may not publish under the prefix: a forged event
	// with a huge seq (which would make subscribers drop every real event)
	// and a retained "offline" never reach anyone.
	for _, args := range [][]string{{"-t", prefix + "front/events", "-m", `{"seq":999999}`, "-q", "1"},
		{"-t", prefix + "availability", "-m", "offline", "-r", "-q", "0"}} {
		exec.Command(needTool(t, "mosquitto_pub"), append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(port), "-u", "veh", "-P", "pw-123"}, args...)...).Run()
	}
	time.Sleep(300 * time.Millisecond)
	for _, msg := range sub.messages() {
		if strings.Contains(msg.payload, "999999") || msg.payload == "offline" {
			t.Fatalf("a forged message reached a subscriber: %s %s", msg.topic, msg.payload)
		}
	}
	closed = true
	if err := svc.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// A zone's state follows the event it was set with: the publisher's
	// goroutine sends the queued events before the states set after
	// them, over the one connection, so no state names an episode
	// whose new event the subscriber has not seen yet.
	seenEpisode := map[string]bool{}
	states := 0
	for _, msg := range sub.messages() {
		switch {
		case strings.HasSuffix(msg.topic, "/events"):
			var ev alerts.Event
			json.Unmarshal([]byte(msg.payload), &ev)
			seenEpisode[ev.ID] = true
		case strings.HasSuffix(msg.topic, "/state"):
			var st alerts.State
			json.Unmarshal([]byte(msg.payload), &st)
			if st.EpisodeID != "" {
				states++
				if !seenEpisode[st.EpisodeID] {
					t.Fatalf("state of episode %s arrived before its event", st.EpisodeID)
				}
			}
		}
	}
	if states == 0 {
		t.Fatal("no state named an episode")
	}
	schemas := map[string]string{"events": schema.Event, "state": schema.State, "stats": schema.Stats}
	var types []string
	for _, msg := range sub.messages() {
		last := msg.topic[strings.LastIndex(msg.topic, "/")+1:]
		if last == "availability" {
			continue
		}
		s, err := schema.Load(schemas[last])
		if err != nil {
			t.Fatalf("topic %s: %v", msg.topic, err)
		}
		if err := s.Validate([]byte(msg.payload)); err != nil {
			t.Fatalf("%s: %v\n%s", msg.topic, err, msg.payload)
		}
		if last == "events" {
			var ev alerts.Event
			json.Unmarshal([]byte(msg.payload), &ev)
			if ev.Zone != "r0c0" {
				t.Fatalf("event for zone %s, only r0c0 saw the object", ev.Zone)
			}
			types = append(types, string(ev.Type))
		}
	}
	// Frames every 200 ms: new at frame 1; periodic updates (interval
	// 100 ms) at frames 2..5, since ok from frame 4 must wait for the 1 s
	// minimum episode; end at frame 6, 1 s after frame 1 (no merge window).
	if strings.Join(types, ",") != "new,update,update,update,update,end" {
		t.Fatalf("event types %v, want new, four periodic updates, end", types)
	}
	// After Close the embedded broker is gone.
	if out, err := exec.Command(needTool(t, "mosquitto_sub"), "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-u", "veh", "-P", "pw-123",
		"-t", "#", "-C", "1", "-W", "2").CombinedOutput(); err == nil {
		t.Fatalf("broker still serving after Close: %s", out)
	}
}
