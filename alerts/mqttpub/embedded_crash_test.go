package mqttpub

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/didoedge/didoedge/alerts"
)

const embeddedHelperEnv = "DIDOEDGE_EMBEDDED_RUNTIME_HELPER"

// TestHelperEmbeddedRuntime is not a test: it is the runtime process of
// TestEmbeddedBrokerCrashLosesNothing: the Service with the embedded
// broker (persistent store in <outbox>/broker) on PORT and its outbox in
// OUTBOX. It prints "ready", then for each stdin line "emit FIRST N" emits
// N events and prints "acked" once the outbox has none pending and its ack
// file says so on disk (the broker's store has them).
func TestHelperEmbeddedRuntime(t *testing.T) {
	if os.Getenv(embeddedHelperEnv) == "" {
		t.Skip("helper process only")
	}
	yaml := fmt.Sprintf(`vehicle: van-07
camera: front
topic_prefix: didoedge
grid: {rows: 1, cols: 2}
mqtt: {broker: embedded, client_id: crash-runtime, close_timeout: 2s}
outbox: {dir: %q}
embedded: {listen: "127.0.0.1:%s", allow_anonymous: true}
`, os.Getenv("OUTBOX"), os.Getenv("PORT"))
	cfg, err := parseTestSection("helper", []byte(yaml))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	svc, err := Start(context.Background(), cfg.Topics(), cfg.ServiceConfig, nil)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	fmt.Println("ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var first, n int
		if _, err := fmt.Sscanf(sc.Text(), "emit %d %d", &first, &n); err != nil {
			fmt.Println("error", err)
			os.Exit(3)
		}
		for i := first; i < first+n; i++ {
			ev := syntheticEvent(i)
			if err := svc.Event(&ev); err != nil {
				fmt.Println("error", err)
				os.Exit(3)
			}
		}
		// Acknowledged in the outbox, and that on disk: after the kill the
		// outbox has forgotten them and only the broker's store has them.
		for st := svc.pub.OutboxStats(); st.Pending > 0 || st.AckedOnDisk < st.LastSeq; st = svc.pub.OutboxStats() {
			time.Sleep(5 * time.Millisecond)
		}
		fmt.Println("acked")
	}
	select {} // until killed
}

type runtimeProc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

func startRuntimeProc(t *testing.T, port int, dir string) *runtimeProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperEmbeddedRuntime$", "-test.v=false")
	cmd.Env = append(os.Environ(), embeddedHelperEnv+"=1", "OUTBOX="+dir, fmt.Sprintf("PORT=%d", port))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &runtimeProc{cmd: cmd, in: in, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(p.kill)
	p.expect(t, "ready")
	return p
}

func (p *runtimeProc) expect(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("runtime process ended before %q", want)
			}
			if strings.HasPrefix(l, "error") {
				t.Fatalf("runtime process: %s", l)
			}
			if l == want {
				return
			}
		case <-deadline:
			t.Fatalf("runtime process: no %q within 20s", want)
		}
	}
}

func (p *runtimeProc) emit(t *testing.T, first, n int) {
	t.Helper()
	fmt.Fprintf(p.in, "emit %d %d\n", first, n)
	p.expect(t, "acked")
}

// kill ends the process by its PID with SIGKILL: a crash.
func (p *runtimeProc) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
	}
}

// seqSub is a paho subscriber with a persistent session (clean session
// off, QoS 1) recording the seq of every event in arrival order.
type seqSub struct {
	mu   sync.Mutex
	seqs []uint64
	c    mqtt.Client
}

func connectSeqSub(t *testing.T, port int, sub bool, s *seqSub) {
	t.Helper()
	co := mqtt.NewClientOptions().AddBroker(fmt.Sprintf("tcp://127.0.0.1:%d", port)).SetClientID("crash-sub").
		SetCleanSession(false).SetAutoReconnect(false).SetConnectTimeout(2 * time.Second).SetOrderMatters(true).
		SetDefaultPublishHandler(func(_ mqtt.Client, m mqtt.Message) {
			var ev alerts.Event
			if err := json.Unmarshal(m.Payload(), &ev); err != nil {
				t.Errorf("payload %q: %v", m.Payload(), err)
				return
			}
			s.mu.Lock()
			s.seqs = append(s.seqs, ev.Seq)
			s.mu.Unlock()
		})
	s.c = mqtt.NewClient(co)
	if tok := s.c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("subscriber connect: %v", tok.Error())
	}
	if sub {
		if tok := s.c.Subscribe(testTopics.Events("front"), 1, nil); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("subscribe: %v", tok.Error())
		}
	}
}

func (s *seqSub) waitFor(t *testing.T, n int) []uint64 {
	t.Helper()
	for range 1000 {
		s.mu.Lock()
		got := slices.Clone(s.seqs)
		s.mu.Unlock()
		if len(got) >= n {
			time.Sleep(100 * time.Millisecond) // anything extra (a duplicate) would show now
			s.mu.Lock()
			defer s.mu.Unlock()
			return slices.Clone(s.seqs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Fatalf("subscriber got %d events, want %d: %v", len(s.seqs), n, s.seqs)
	return nil
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// TestEmbeddedBrokerCrashLosesNothing is the reproduction with the
// embedded broker in a runtime process: a subscriber with a persistent
// session (clean session off, QoS 1) receives 12 events and goes away;
// the runtime emits 60 more, which the broker queues for it and the
// outbox then forgets (acknowledged); SIGKILL; restart on the same outbox
// and store; the subscriber comes back with the same client id and gets
// all 60, in publish order (the issue: 0 of 6 after the crash, and out of
// order without one); 5 events emitted while it is connected follow. No
// event is lost, none repeated, all in seq order.
func TestEmbeddedBrokerCrashLosesNothing(t *testing.T) {
	port := freePort(t)
	dir := t.TempDir()
	rt := startRuntimeProc(t, port, dir)
	var sub seqSub
	connectSeqSub(t, port, true, &sub)
	rt.emit(t, 0, 12)
	if got := sub.waitFor(t, 12); !slices.Equal(got, seqRange(1, 12)) {
		t.Fatalf("before the crash: %v", got)
	}
	sub.c.Disconnect(100)
	time.Sleep(100 * time.Millisecond)
	rt.emit(t, 12, 60)
	rt.kill()
	rt = startRuntimeProc(t, port, dir)
	connectSeqSub(t, port, false, &sub)
	defer sub.c.Disconnect(100)
	got := sub.waitFor(t, 72)
	rt.emit(t, 72, 5)
	got = sub.waitFor(t, 77)
	if !slices.Equal(got, seqRange(1, 77)) {
		t.Fatalf("subscriber got %d events: %v\nwant seqs 1..77 once each, in order", len(got), got)
	}
}
