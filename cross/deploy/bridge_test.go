package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/didoedge/didoedge/alerts/broker"
	"github.com/didoedge/didoedge/internal/testnet"
)

// rewrite replaces the whole line of each directive named in set (its
// first occurrence) and fails when one is missing: the test runs the
// shipped file with only addresses, paths and secrets changed.
func rewrite(t *testing.T, file string, set map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	done := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		key, _, _ := strings.Cut(line, " ")
		if v, ok := set[key]; ok && !done[key] && !strings.HasPrefix(line, "#") {
			line, done[key] = key+" "+v, true
		}
		out = append(out, line)
	}
	for k := range set {
		if !done[k] {
			t.Fatalf("%s has no %q line", file, k)
		}
	}
	return strings.Join(out, "\n") + "\n"
}

// mosq is a mosquitto process stopped by its PID.
type mosq struct {
	t               *testing.T
	bin, conf, logf string
	port            int
	cmd             *exec.Cmd
	done            chan struct{}
}

func startMosq(t *testing.T, dir, body string, port int) *mosq {
	t.Helper()
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		bin = "/usr/sbin/mosquitto"
	}
	if os.Geteuid() == 0 {
		body += "user root\n" // the test's directory is not open to the mosquitto user
	}
	body += "log_dest stderr\nlog_type error\nlog_type warning\nlog_type notice\n"
	m := &mosq{t: t, bin: bin, conf: filepath.Join(dir, "mosquitto.conf"), logf: filepath.Join(dir, "mosquitto.log"), port: port}
	if err := os.WriteFile(m.conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.stop()
		if t.Failed() {
			b, _ := os.ReadFile(m.logf)
			t.Logf("%s:\n%s", m.logf, b)
		}
	})
	return m
}

// start runs the broker (again: same config, port and database). It does
// not call t.Fatal: the restart runs on another goroutine.
func (m *mosq) start() error {
	log, err := os.OpenFile(m.logf, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	m.cmd = exec.Command(m.bin, "-c", m.conf)
	m.cmd.Stdout, m.cmd.Stderr = log, log
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		log.Close()
		return err
	}
	m.done = make(chan struct{})
	go func() { m.cmd.Wait(); log.Close(); close(m.done) }()
	addr := fmt.Sprintf("127.0.0.1:%d", m.port)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
	}
	return fmt.Errorf("mosquitto %s: nothing listens on %s after 10 s", m.conf, addr)
}

// stop sends SIGTERM to the PID (mosquitto writes its persistence
// database on the way out) and waits.
func (m *mosq) stop() {
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		m.cmd.Process.Kill()
		<-m.done
	}
	m.cmd = nil
}

func passwd(t *testing.T, file string, users map[string]string) {
	t.Helper()
	first := true
	for u, p := range users {
		args := []string{"-b", file, u, p}
		if first {
			args = []string{"-c", "-b", file, u, p}
			first = false
		}
		if out, err := exec.Command("mosquitto_passwd", args...).CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_passwd: %v %s", err, out)
		}
	}
}

// TestBridgeFanIn runs cross/deploy/mosquitto's configurations: events of one
// vehicle reach a fleet subscriber (clean session off, QoS 1) through a
// bridge, the fleet broker is restarted by its PID in the middle of the
// stream, and not one event is lost (duplicates are allowed: QoS 1 is at
// least once). Two vehicle sides:
//
//   - push: a vehicle mosquitto (vehicle-bridge.conf) bridging out to the
//     fleet broker (fleet.conf); a paho client publishes as didoedge's
//     mqtt publisher does (QoS 1, clean session off);
//   - pull: didoedge's embedded broker (alerts/broker, with its disk
//     store), bridged to by the fleet broker (fleet.conf plus
//     fleet-pull-bridge.conf); the events go through Broker.Publish, the
//     runtime's own path.
func TestBridgeFanIn(t *testing.T) {
	if _, err := exec.LookPath("mosquitto_passwd"); err != nil {
		t.Fatalf("mosquitto_passwd not installed (scripts/deps.sh installs mosquitto): %v", err)
	}
	for _, side := range []string{"push", "pull"} {
		t.Run(side, func(t *testing.T) { bridgeFanIn(t, side) })
	}
}

func bridgeFanIn(t *testing.T, side string) {
	const (
		events   = 400
		interval = 5 * time.Millisecond
		topic    = "didoedge/van-07/front/events"
		subPass  = "sub-secret"
		bridgePw = "bridge-secret"
	)
	root := t.TempDir()
	fleetDir, vehicleDir := filepath.Join(root, "fleet"), filepath.Join(root, "vehicle")
	os.MkdirAll(fleetDir, 0o700)
	os.MkdirAll(vehicleDir, 0o700)
	fleetPort := testnet.FreePort(t)
	pw := filepath.Join(fleetDir, "passwd")
	passwd(t, pw, map[string]string{"van-07": bridgePw, "fleet-sub": subPass})
	fleetConf := rewrite(t, "mosquitto/fleet.conf", map[string]string{
		"listener": fmt.Sprintf("%d 127.0.0.1", fleetPort), "password_file": pw, "persistence_location": fleetDir + "/"})

	var publish func(seq int) error
	switch side {
	case "push":
		vport := testnet.FreePort(t)
		startMosq(t, vehicleDir, rewrite(t, "mosquitto/vehicle-bridge.conf", map[string]string{
			"listener": fmt.Sprintf("%d 127.0.0.1", vport), "persistence_location": vehicleDir + "/",
			"address": fmt.Sprintf("127.0.0.1:%d", fleetPort), "remote_password": bridgePw}), vport)
		o := paho.NewClientOptions().AddBroker(fmt.Sprintf("tcp://127.0.0.1:%d", vport)).SetClientID("didoedge-van-07").
			SetCleanSession(false).SetOrderMatters(false).SetAutoReconnect(true)
		pub := paho.NewClient(o)
		if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publisher connect: %v", tok.Error())
		}
		defer pub.Disconnect(100)
		publish = func(seq int) error {
			tok := pub.Publish(topic, 1, false, fmt.Sprintf(`{"schema":"didoedge.event/1","seq":%d}`, seq))
			if !tok.WaitTimeout(10 * time.Second) {
				return fmt.Errorf("publish %d: no PUBACK in 10 s", seq)
			}
			return tok.Error()
		}
	case "pull":
		b, err := broker.Start(context.Background(), broker.Options{Listen: "127.0.0.1:0",
			Users: []broker.User{{Username: "fleet", Password: bridgePw, Read: []string{"didoedge/#"}}},
			Store: broker.StoreSettings{Dir: vehicleDir}})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		fleetConf += "\n" + rewrite(t, "mosquitto/fleet-pull-bridge.conf", map[string]string{
			"address": b.Addr(), "remote_password": bridgePw})
		publish = func(seq int) error {
			return b.Publish(topic, []byte(fmt.Sprintf(`{"schema":"didoedge.event/1","seq":%d}`, seq)), false, 1)
		}
	}
	fleet := startMosq(t, fleetDir, fleetConf, fleetPort)

	// The fleet subscriber: a persistent session (clean session off) at
	// QoS 1, reconnecting on its own.
	var mu sync.Mutex
	got := map[int]int{}
	arrived := make(chan struct{}, 1)
	so := paho.NewClientOptions().AddBroker(fmt.Sprintf("tcp://127.0.0.1:%d", fleetPort)).SetClientID("fleet-sub").
		SetUsername("fleet-sub").SetPassword(subPass).SetCleanSession(false).SetOrderMatters(false).
		SetAutoReconnect(true).SetMaxReconnectInterval(250 * time.Millisecond).SetConnectRetry(true)
	so.SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
		var ev struct{ Seq int }
		if err := json.Unmarshal(m.Payload(), &ev); err != nil {
			t.Errorf("payload %q: %v", m.Payload(), err)
			return
		}
		mu.Lock()
		got[ev.Seq]++
		mu.Unlock()
		select {
		case arrived <- struct{}{}:
		default:
		}
	})
	sub := paho.NewClient(so)
	if tok := sub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscriber connect: %v", tok.Error())
	}
	defer sub.Disconnect(100)
	if tok := sub.Subscribe("didoedge/+/+/events", 1, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	count := func() (unique, total int) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range got {
			unique++
			total += n
		}
		return
	}
	// Event 0 goes first, alone: the bridge is up end to end when it
	// arrives.
	deadline := time.Now().Add(20 * time.Second)
	for n, _ := count(); n == 0; n, _ = count() {
		if err := publish(0); err != nil {
			t.Fatal(err)
		}
		select {
		case <-arrived:
		case <-time.After(time.Second):
		}
		if time.Now().After(deadline) {
			t.Fatal("event 0 never reached the fleet subscriber: the bridge did not connect")
		}
	}

	// The stream; the fleet broker is stopped once a quarter of it has
	// arrived, and started again 1.5 s later.
	var whileDown int
	var down sync.WaitGroup
	var downFlag struct {
		sync.Mutex
		on bool
	}
	restarted := false
	var restartErr error
	for seq := 1; seq <= events; seq++ {
		if err := publish(seq); err != nil {
			t.Fatal(err)
		}
		downFlag.Lock()
		if downFlag.on {
			whileDown++
		}
		downFlag.Unlock()
		if n, _ := count(); !restarted && n >= events/4 {
			restarted = true
			down.Add(1)
			go func() {
				defer down.Done()
				downFlag.Lock()
				downFlag.on = true
				downFlag.Unlock()
				fleet.stop()
				time.Sleep(1500 * time.Millisecond)
				restartErr = fleet.start()
				downFlag.Lock()
				downFlag.on = false
				downFlag.Unlock()
			}()
		}
		time.Sleep(interval)
	}
	down.Wait()
	if restartErr != nil {
		t.Fatal(restartErr)
	}
	if !restarted || whileDown == 0 {
		t.Fatalf("the fleet broker was not restarted during the stream (restarted %v, events published while it was down %d)", restarted, whileDown)
	}
	deadline = time.Now().Add(45 * time.Second)
	for {
		unique, total := count()
		if unique == events+1 {
			t.Logf("%s: %d events, %d published while the fleet broker was down, %d received (%d duplicates), 0 lost", side, events+1, whileDown, total, total-unique)
			return
		}
		if time.Now().After(deadline) {
			var missing []int
			mu.Lock()
			for s := 0; s <= events; s++ {
				if got[s] == 0 {
					missing = append(missing, s)
				}
			}
			mu.Unlock()
			t.Fatalf("%s: %d of %d events lost after the fleet broker's restart: %v...", side, len(missing), events+1, missing[:min(len(missing), 20)])
		}
		time.Sleep(100 * time.Millisecond)
	}
}
