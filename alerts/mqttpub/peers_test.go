package mqttpub

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/testnet"
)

// freePort is testnet.FreePort under the name this package's tests use.
func freePort(t *testing.T) int { return testnet.FreePort(t) }

func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		for _, dir := range []string{"/usr/sbin", "/usr/bin"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				return filepath.Join(dir, name)
			}
		}
		t.Fatalf("%s not installed (scripts/deps.sh installs it)", name)
	}
	return p
}

// mosquitto is a broker process on 127.0.0.1 with its own config file.
type mosquitto struct {
	t    *testing.T
	bin  string
	conf string
	port int
	cmd  *exec.Cmd
	log  *os.File
}

// startMosquitto writes a config (listener on 127.0.0.1:port, persistence
// in the test's directory, plus extra lines) and starts the broker.
func startMosquitto(t *testing.T, port int, extra string) *mosquitto {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "mosquitto.conf")
	body := fmt.Sprintf("listener %d 127.0.0.1\npersistence true\npersistence_location %s/\nautosave_interval 1\nlog_dest stderr\nlog_type error\nlog_type warning\nlog_type notice\n%s",
		port, dir, extra)
	if os.Geteuid() == 0 {
		body += "user root\n" // keep root: the test directory is not open to other users
	}
	if !strings.Contains(extra, "allow_anonymous") {
		body += "allow_anonymous true\n"
	}
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &mosquitto{t: t, bin: needTool(t, "mosquitto"), conf: conf, port: port}
	var err error
	if m.log, err = os.Create(filepath.Join(dir, "mosquitto.log")); err != nil {
		t.Fatal(err)
	}
	m.start()
	t.Cleanup(func() {
		m.stop()
		if t.Failed() {
			b, _ := os.ReadFile(m.log.Name())
			t.Logf("mosquitto log:\n%s", b)
		}
	})
	return m
}

func (m *mosquitto) start() {
	m.t.Helper()
	m.cmd = exec.Command(m.bin, "-c", m.conf)
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	testnet.WaitListening(m.t, m.port, 5*time.Second)
}

// stop ends the broker by its PID (SIGTERM: it saves its persistence).
func (m *mosquitto) stop() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { m.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		m.cmd.Process.Kill()
		<-done
	}
	m.cmd = nil
}

// subscriber is a mosquitto_sub process; it collects "topic payload" lines.
type subscriber struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	msgs []message
	subs int // SUBACKs seen
	cond chan struct{}
	errb strings.Builder
}

type message struct{ topic, payload string }

// startSubscriber runs mosquitto_sub -v -d with args and waits for its SUBACK.
func startSubscriber(t *testing.T, args ...string) *subscriber {
	t.Helper()
	bin := needTool(t, "mosquitto_sub")
	s := &subscriber{cond: make(chan struct{}, 1)}
	// stdbuf makes its stdout line-buffered: the debug lines (SUBACK)
	// would otherwise sit in a buffer.
	s.cmd = exec.Command(needTool(t, "stdbuf"), append([]string{"-oL", bin, "-v", "-d"}, args...)...)
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stderr = &lockedWriter{w: &s.errb, mu: &s.mu}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	})
	go s.read(out)
	s.waitFor(t, 10*time.Second, "SUBACK", func() bool { return s.subs > 0 })
	return s
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (s *subscriber) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		s.mu.Lock()
		switch {
		case strings.HasPrefix(line, "Client ") && strings.Contains(line, "received SUBACK"):
			s.subs++
		case strings.HasPrefix(line, "Client ") || strings.HasPrefix(line, "Subscribed "):
		default:
			topic, payload, _ := strings.Cut(line, " ")
			s.msgs = append(s.msgs, message{topic, payload})
		}
		s.mu.Unlock()
		select {
		case s.cond <- struct{}{}:
		default:
		}
	}
}

// waitFor polls cond (under the lock) until it holds or the timeout passes.
func (s *subscriber) waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-s.cond:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			s.mu.Lock()
			defer s.mu.Unlock()
			t.Fatalf("timed out after %v waiting for %s; %d messages; mosquitto_sub stderr:\n%s", timeout, what, len(s.msgs), s.errb.String())
		}
	}
}

func (s *subscriber) messages() []message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]message(nil), s.msgs...)
}
