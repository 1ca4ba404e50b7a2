package broker

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

type clientOpts struct {
	user, pass string
	will       string // will topic
	tls        *tls.Config
	scheme     string
}

func connectWith(t *testing.T, addr, id string, o clientOpts) (mqtt.Client, error) {
	t.Helper()
	scheme := "tcp://"
	if o.tls != nil {
		scheme = "ssl://"
	}
	co := mqtt.NewClientOptions().AddBroker(scheme + addr).SetClientID(id).SetConnectTimeout(2 * time.Second).
		SetAutoReconnect(false).SetConnectRetry(false)
	if o.user != "" {
		co.SetUsername(o.user).SetPassword(o.pass)
	}
	if o.will != "" {
		co.SetWill(o.will, "offline", 1, true)
	}
	if o.tls != nil {
		co.SetTLSConfig(o.tls)
	}
	c := mqtt.NewClient(co)
	tok := c.Connect()
	if !tok.WaitTimeout(5 * time.Second) {
		t.Fatal("connect timed out")
	}
	return c, tok.Error()
}

func connect(t *testing.T, addr, id, user, pass string) (mqtt.Client, error) {
	t.Helper()
	return connectWith(t, addr, id, clientOpts{user: user, pass: pass})
}

func mustConnect(t *testing.T, addr, id, user, pass string) mqtt.Client {
	t.Helper()
	c, err := connect(t, addr, id, user, pass)
	if err != nil {
		t.Fatalf("connect %s as %q: %v", id, user, err)
	}
	t.Cleanup(func() { c.Disconnect(0) })
	return c
}

// inbox collects the messages of one subscription.
type inbox struct {
	mu   sync.Mutex
	msgs []string // "topic payload"
}

func (in *inbox) handler(_ mqtt.Client, m mqtt.Message) {
	in.mu.Lock()
	in.msgs = append(in.msgs, m.Topic()+" "+string(m.Payload()))
	in.mu.Unlock()
}

func (in *inbox) all() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.msgs...)
}

// subscribe returns the SUBACK result code and the inbox.
func subscribe(t *testing.T, c mqtt.Client, filter string) (byte, *inbox) {
	t.Helper()
	in := &inbox{}
	tok := c.Subscribe(filter, 1, in.handler)
	if !tok.WaitTimeout(3 * time.Second) {
		t.Fatalf("subscribe %q timed out", filter)
	}
	st := tok.(*mqtt.SubscribeToken)
	return st.Result()[filter], in
}

func TestStartValidates(t *testing.T) {
	ctx := context.Background()
	for _, o := range []Options{
		{Listen: "127.0.0.1:0"},
		{Listen: "nonsense", AllowAnonymous: true},
		{Listen: "127.0.0.1:99999", AllowAnonymous: true},
		{Listen: "bad host!:1883", AllowAnonymous: true},
		{Listen: "127.0.0.1:0", Users: []User{{Username: "a"}}},
		{Listen: "127.0.0.1:0", Users: []User{{Username: "a", Password: "x"}, {Username: "a", Password: "y"}}},
		{Listen: "127.0.0.1:0", Users: []User{{Username: "a", Password: "x", Read: []string{"a/#/b"}}}},
		{Listen: "127.0.0.1:0", Users: []User{{Username: "a", Password: "x", Write: []string{"a+/b"}}}},
		{Listen: Off, AllowAnonymous: true},
		{Listen: "127.0.0.1:0", TLSListen: "127.0.0.1:0", AllowAnonymous: true}, // no TLS config
	} {
		if b, err := Start(ctx, o); err == nil {
			b.Close()
			t.Errorf("options %+v accepted", o)
		}
	}
}

func TestPortInUseNamesTheAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Start(context.Background(), Options{Listen: ln.Addr().String(), AllowAnonymous: true})
	if err == nil || !strings.Contains(err.Error(), ln.Addr().String()) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("port in use: %v", err)
	}
}

func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		grant, filter string
		want          bool
	}{
		{"didoedge/#", "didoedge/van/front/events", true},
		{"didoedge/#", "didoedge", true},
		{"didoedge/#", "didoedge/+/front/#", true},
		{"didoedge/#", "#", false},
		{"didoedge/#", "+/van", false},
		{"didoedge/+/front/events", "didoedge/van/front/events", true},
		{"didoedge/+/front/events", "didoedge/+/front/events", true},
		{"didoedge/+/front/events", "didoedge/#", false},
		{"didoedge/+/front/events", "didoedge/van/front", false},
		{"#", "$SYS/broker/uptime", false},
		{"+/broker/uptime", "$SYS/broker/uptime", false},
		{"$SYS/#", "$SYS/broker/uptime", true},
		{"#", "anything/at/all", true},
		{"a/b", "a/b/c", false},
	} {
		if got := covers(tc.grant, tc.filter); got != tc.want {
			t.Errorf("covers(%q, %q) = %v, want %v", tc.grant, tc.filter, got, tc.want)
		}
	}
}

// TestACL: the broker as the runtime runs it: its own client alone may
// publish under the prefix; "ops" (a listed subscriber) reads the prefix;
// anonymous clients read the prefix; "sysmon" is granted $SYS. An
// unauthorized client can neither publish under the prefix (the forged
// seq 999999 of issue 16, a retained "offline"), nor set a will there, nor
// read $SYS or "#". mosquitto_pub, an independent client, is one of the
// attackers.
func TestACL(t *testing.T) {
	var logs syncBuffer
	b, err := Start(context.Background(), Options{Listen: "127.0.0.1:0", AllowAnonymous: true, AnonymousRead: []string{"didoedge/#"},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Users: []User{
			{Username: "didoedge-runtime", Password: "rt-secret", Write: []string{"didoedge/#"}, Unlimited: true},
			{Username: "ops", Password: "ops-pw", Read: []string{"didoedge/#"}},
			{Username: "sysmon", Password: "sys-pw", Read: []string{"$SYS/#"}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	addr := b.Addr()
	events := "didoedge/van-07/front/events"
	avail := "didoedge/van-07/availability"

	ops := mustConnect(t, addr, "ops-sub", "ops", "ops-pw")
	code, opsIn := subscribe(t, ops, "didoedge/#")
	if code != 1 {
		t.Fatalf("ops subscribing to its grant: SUBACK %#x, want QoS 1", code)
	}
	for _, f := range []string{"#", "$SYS/#", "other/#"} {
		if code, _ := subscribe(t, ops, f); code != 0x80 {
			t.Errorf("ops subscribing to %q: SUBACK %#x, want 0x80 (refused)", f, code)
		}
	}
	anon := mustConnect(t, addr, "anon-sub", "", "")
	if code, _ := subscribe(t, anon, "$SYS/#"); code != 0x80 {
		t.Errorf("anonymous subscribing to $SYS/#: SUBACK %#x, want 0x80", code)
	}
	code, anonIn := subscribe(t, anon, "didoedge/#")
	if code != 1 {
		t.Fatalf("anonymous read of the prefix: SUBACK %#x", code)
	}
	sysmon := mustConnect(t, addr, "sysmon", "sysmon", "sys-pw")
	code, sysIn := subscribe(t, sysmon, "$SYS/broker/uptime")
	if code != 1 {
		t.Fatalf("sysmon subscribing to $SYS: SUBACK %#x", code)
	}

	// Attacks: ops publishes a forged event (QoS 1: mochi disconnects it),
	// anonymous retains "offline" (QoS 0: dropped), mosquitto_pub with the
	// ops account, a will under the prefix.
	if tok := ops.Publish(events, 1, false, `{"seq":999999}`); tok.WaitTimeout(2*time.Second) && tok.Error() == nil && ops.IsConnectionOpen() {
		time.Sleep(300 * time.Millisecond)
		if ops.IsConnectionOpen() {
			t.Error("ops published QoS 1 under the prefix and stayed connected")
		}
	}
	anon.Publish(avail, 0, true, "offline").WaitTimeout(time.Second)
	if out, err := mosquittoPub(t, addr, "-u", "ops", "-P", "ops-pw", "-t", events, "-m", `{"seq":999998}`, "-q", "0"); err != nil {
		t.Logf("mosquitto_pub: %v %s", err, out)
	}
	if c, err := connectWith(t, addr, "will-attack", clientOpts{user: "ops", pass: "ops-pw", will: avail}); err == nil {
		c.Disconnect(0)
		t.Error("a client with a will under the prefix was accepted")
	}
	// Positive controls: the runtime's client publishes, $SYS is published.
	rt := mustConnect(t, addr, "runtime", "didoedge-runtime", "rt-secret")
	if tok := rt.Publish(events, 1, false, `{"seq":1}`); !tok.WaitTimeout(2*time.Second) || tok.Error() != nil {
		t.Fatalf("runtime publish: %v", tok.Error())
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && (len(anonIn.all()) == 0 || len(sysIn.all()) == 0) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // $SYS is published every second: let a round reach every subscriber
	for _, in := range []*inbox{anonIn} {
		if got := in.all(); len(got) != 1 || got[0] != events+` {"seq":1}` {
			t.Errorf("anonymous subscriber received %q, want only the runtime's event", got)
		}
	}
	for _, m := range opsIn.all() {
		if strings.Contains(m, "999") || strings.Contains(m, "offline") || strings.HasPrefix(m, "$SYS") {
			t.Errorf("ops received a forged or $SYS message %q", m)
		}
	}
	if len(sysIn.all()) == 0 {
		t.Error("sysmon (granted $SYS) received no $SYS message: the $SYS denial above proves nothing")
	}
	// No retained message under the prefix was stored by the attackers.
	late := mustConnect(t, addr, "late", "ops", "ops-pw")
	_, lateIn := subscribe(t, late, "didoedge/#")
	time.Sleep(300 * time.Millisecond)
	if got := lateIn.all(); len(got) != 0 {
		t.Errorf("retained messages under the prefix: %q", got)
	}
	st := b.Stats()
	if st.Denied == 0 || st.AuthFailed == 0 {
		t.Errorf("stats %+v: denials not counted", st)
	}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(line, `msg=""`) || strings.Contains(line, "msg= ") {
			t.Errorf("log line with an empty message: %s", line)
		}
	}
	t.Logf("stats %+v\nlog:\n%s", st, logs.String())
}

func mosquittoPub(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	return runTool(t, "mosquitto_pub", append([]string{"-h", host, "-p", port, "-i", "attacker"}, args...)...)
}

// TestIdleConnectionsAndLimits: connections that send nothing, or half a
// CONNECT, are closed after ConnectTimeout; beyond MaxConnections a new
// connection is closed at once; garbage is dropped with a log line that
// has a message; a real client still gets in afterwards.
func TestIdleConnectionsAndLimits(t *testing.T) {
	var logs syncBuffer
	b, err := Start(context.Background(), Options{Listen: "127.0.0.1:0", AllowAnonymous: true, AnonymousRead: []string{"x/#"},
		ConnectTimeout: 300 * time.Millisecond, MaxConnections: 8, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closedWithin := func(c net.Conn, d time.Duration) bool {
		c.SetReadDeadline(time.Now().Add(d))
		_, err := c.Read(make([]byte, 16))
		return err != nil && !isTimeout(err)
	}
	var idle []net.Conn
	for range 8 {
		idle = append(idle, dial())
	}
	idle[0].Write([]byte{0x10, 0x20, 0x00}) // half a CONNECT
	time.Sleep(50 * time.Millisecond)
	extra := dial() // the ninth: over the limit
	if !closedWithin(extra, 200*time.Millisecond) {
		t.Error("a connection over max_connections was kept open")
	}
	start := time.Now()
	for i, c := range idle {
		if !closedWithin(c, 2*time.Second) {
			t.Fatalf("idle connection %d still open after %v", i, time.Since(start))
		}
	}
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Errorf("idle connections closed after %v, want about 300ms", el)
	}
	garbage := dial()
	garbage.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	if !closedWithin(garbage, 2*time.Second) {
		t.Error("a connection sending garbage was kept open")
	}
	c := mustConnect(t, b.Addr(), "after", "", "")
	if code, _ := subscribe(t, c, "x/y"); code != 1 {
		t.Errorf("a real client after the idle ones: SUBACK %#x", code)
	}
	c.Disconnect(0)
	time.Sleep(100 * time.Millisecond)
	st := b.Stats()
	if st.IdleClosed != 8 || st.Refused != 1 || st.NotMQTT != 1 {
		t.Errorf("stats %+v, want 8 idle closed, 1 refused, 1 not MQTT", st)
	}
	log := logs.String()
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if strings.Contains(line, `msg=""`) || strings.Contains(line, `msg="mqtt broker: client error"`) {
			t.Errorf("log line without a real message: %s", line)
		}
	}
	if !strings.Contains(log, "sent no CONNECT in time") || !strings.Contains(log, "did not start with a valid CONNECT") ||
		!strings.Contains(log, "connection limit reached") {
		t.Errorf("log lacks the causes:\n%s", log)
	}
	// Eight idle connections closed in one interval: one line with the
	// first, one summary with the count.
	if n := strings.Count(log, "sent no CONNECT in time"); n > 2 {
		t.Errorf("%d lines for idle connections, want at most 2 (first + summary)", n)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// runTool runs a command-line peer (mosquitto_pub) with a time limit.
func runTool(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not installed (scripts/deps.sh installs mosquitto-clients)", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return string(out), err
}

// TestMessageRateLimit: a client publishing 60 messages at once with a
// rate of 10/s and a burst of 5 gets at most 5 + 10 x elapsed through.
func TestMessageRateLimit(t *testing.T) {
	b, err := Start(context.Background(), Options{Listen: "127.0.0.1:0", MessageRate: 10, MessageBurst: 5,
		Users: []User{{Username: "pub", Password: "p", Write: []string{"x/#"}}, {Username: "sub", Password: "s", Read: []string{"x/#"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sub := mustConnect(t, b.Addr(), "sub", "sub", "s")
	_, in := subscribe(t, sub, "x/#")
	pub := mustConnect(t, b.Addr(), "pub", "pub", "p")
	start := time.Now()
	for i := range 60 {
		pub.Publish("x/y", 0, false, []byte{byte(i)})
	}
	pub.Publish("x/y", 0, false, "sync").WaitTimeout(time.Second)
	elapsed := time.Since(start)
	time.Sleep(300 * time.Millisecond)
	got := len(in.all())
	bound := 5 + int(10*elapsed.Seconds()) + 1
	if got > bound || got < 5 {
		t.Errorf("%d of 61 publishes delivered in %v, want between 5 and %d", got, elapsed, bound)
	}
	if st := b.Stats(); st.RateLimited != uint64(61-got) {
		t.Errorf("rate-limited %d, want %d", st.RateLimited, 61-got)
	}
}

// TestTLSListenerWithClientCA: the TLS listener serves a certificate
// signed by a test CA and, with a client CA, admits only clients with a
// certificate signed by it.
func TestTLSListenerWithClientCA(t *testing.T) {
	ca, caKey := newCA(t)
	serverCert := leaf(t, ca, caKey, "broker", true)
	clientCert := leaf(t, ca, caKey, "ops-client", false)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	b, err := Start(context.Background(), Options{Listen: Off, TLSListen: "127.0.0.1:0",
		TLS:   &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{serverCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert},
		Users: []User{{Username: "ops", Password: "pw", Read: []string{"didoedge/#"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Addr() != "" || b.TLSAddr() == "" {
		t.Fatalf("addr %q tls %q", b.Addr(), b.TLSAddr())
	}
	good := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{clientCert}}
	c, err := connectWith(t, b.TLSAddr(), "tls-ok", clientOpts{user: "ops", pass: "pw", tls: good})
	if err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
	if code, _ := subscribe(t, c, "didoedge/#"); code != 1 {
		t.Errorf("SUBACK %#x over TLS", code)
	}
	c.Disconnect(0)
	noCert := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if c, err := connectWith(t, b.TLSAddr(), "tls-nocert", clientOpts{user: "ops", pass: "pw", tls: noCert}); err == nil {
		c.Disconnect(0)
		t.Error("a client without a certificate was admitted")
	}
	// A plain-TCP client on the TLS port is dropped.
	conn, err := net.Dial("tcp", b.TLSAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte{0x10, 0x0c, 0, 4, 'M', 'Q', 'T', 'T', 4, 2, 0, 10, 0, 0})
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.ReadAll(conn); isTimeout(err) {
		t.Error("plain MQTT on the TLS listener was kept open")
	}
}

func newCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}

func leaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, server bool) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// syncBuffer is a bytes.Buffer safe for concurrent log writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
