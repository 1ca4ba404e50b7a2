package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitListening waits until addr accepts TCP connections or done closes.
func waitListening(ctx context.Context, addr string, done <-chan struct{}, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s: process exited before listening", addr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not listening within %v", addr, limit)
		}
	}
}

// proc is a child process stopped by its PID.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
	// err is cmd.Wait's result, set before done closes.
	err error
}

func startProc(name string, args []string, logPath string) (*proc, error) {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p := &proc{cmd: exec.Command(name, args...), done: make(chan struct{}), log: lf}
	p.cmd.Stdout, p.cmd.Stderr = lf, lf
	if err := p.cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { p.err = p.cmd.Wait(); lf.Close(); close(p.done) }()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends sig and waits up to grace, then SIGKILLs; it reports
// whether the process ended within grace.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) bool {
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return true
	case <-time.After(grace):
		p.cmd.Process.Kill()
		<-p.done
		return false
	}
}

// chaosMosquitto is a mosquitto with persistence on a fixed port, so that
// a restart (SIGTERM: mosquitto saves its database) keeps the persistent
// subscribers' sessions and queues, and no queue bound drops events.
type chaosMosquitto struct {
	bin, dir, addr string
	p              *proc
}

func (m *chaosMosquitto) start(ctx context.Context) error {
	port := m.addr[strings.LastIndexByte(m.addr, ':')+1:]
	conf := filepath.Join(m.dir, "mosquitto.conf")
	body := fmt.Sprintf("listener %s 127.0.0.1\nallow_anonymous true\npersistence true\npersistence_location %s/\nmax_queued_messages 0\nlog_dest stderr\nlog_type error\nlog_type warning\n",
		port, m.dir)
	if os.Geteuid() == 0 {
		body += "user root\n"
	}
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		return err
	}
	p, err := startProc(m.bin, []string{"-c", conf}, filepath.Join(m.dir, "mosquitto.log"))
	if err != nil {
		return err
	}
	m.p = p
	if err := waitListening(ctx, m.addr, p.done, 10*time.Second); err != nil {
		p.stop(syscall.SIGKILL, time.Second)
		return fmt.Errorf("mosquitto: %w", err)
	}
	return nil
}

// stop ends mosquitto by its PID: SIGTERM (it writes its database), then
// SIGKILL after 10 s.
func (m *chaosMosquitto) stop() {
	if m.p != nil && !m.p.exited() {
		m.p.stop(syscall.SIGTERM, 10*time.Second)
	}
}

// received is one event message as a subscriber got it.
type received struct {
	Seq uint64 `json:"seq"`
	ID  string `json:"id"`
	// At is the arrival in ns since the phase began.
	At int64 `json:"at_ns"`
}

// chaosSubscriber is a persistent subscriber (clean session off, QoS 1,
// fixed client id) recording every event it gets, in arrival order.
type chaosSubscriber struct {
	id     string
	c      mqtt.Client
	t0     time.Time
	mu     sync.Mutex
	msgs   []received
	bad    int // payloads without a seq
	last   time.Time
	subbed chan struct{}
	once   sync.Once
	file   *os.File
	w      *bufio.Writer
}

func newChaosSubscriber(addr, clientID, topic, logPath string, t0 time.Time) (*chaosSubscriber, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	s := &chaosSubscriber{id: clientID, t0: t0, subbed: make(chan struct{}), file: f, w: bufio.NewWriter(f)}
	handler := func(_ mqtt.Client, m mqtt.Message) { s.record(m.Payload()) }
	o := mqtt.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(clientID).SetCleanSession(false).
		SetAutoReconnect(true).SetConnectRetry(true).SetConnectRetryInterval(200 * time.Millisecond).
		SetMaxReconnectInterval(time.Second).SetKeepAlive(5 * time.Second).SetOrderMatters(true).
		SetDefaultPublishHandler(handler)
	o.SetOnConnectHandler(func(c mqtt.Client) {
		// A persistent session keeps the subscription; subscribing again
		// on every connect is harmless and covers the first one.
		go func() {
			t := c.Subscribe(topic, 1, handler)
			if t.WaitTimeout(10*time.Second) && t.Error() == nil {
				s.once.Do(func() { close(s.subbed) })
			}
		}()
	})
	s.c = mqtt.NewClient(o)
	s.c.Connect() // retries in the background until the broker is up
	return s, nil
}

func (s *chaosSubscriber) record(payload []byte) {
	var ev struct {
		Seq uint64 `json:"seq"`
		ID  string `json:"id"`
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = now
	if err := json.Unmarshal(payload, &ev); err != nil || ev.Seq == 0 {
		s.bad++
		return
	}
	r := received{Seq: ev.Seq, ID: ev.ID, At: now.Sub(s.t0).Nanoseconds()}
	s.msgs = append(s.msgs, r)
	b, _ := json.Marshal(r)
	s.w.Write(append(b, '\n'))
}

// waitSubscribed waits for the first SUBACK.
func (s *chaosSubscriber) waitSubscribed(ctx context.Context, limit time.Duration) error {
	select {
	case <-s.subbed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(limit):
		return fmt.Errorf("subscriber %s: not subscribed within %v", s.id, limit)
	}
}

func (s *chaosSubscriber) snapshot() (msgs []received, bad int, last time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.msgs...), s.bad, s.last
}

// reset forgets what was recorded (the set-up run's events).
func (s *chaosSubscriber) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs, s.bad = nil, 0
	s.file.Truncate(0)
	s.file.Seek(0, io.SeekStart)
	s.w.Reset(s.file)
}

func (s *chaosSubscriber) close() {
	s.c.Disconnect(250)
	s.mu.Lock()
	s.w.Flush()
	s.file.Close()
	s.mu.Unlock()
}

// procSample reads the resident set of pid from /proc.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) < 1 {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// scrapeMetrics reads the named gauges from a Prometheus text endpoint.
func scrapeMetrics(ctx context.Context, url string, names ...string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, n := range names {
			if rest, ok := strings.CutPrefix(line, n+" "); ok {
				if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
					out[n] = v
				}
			}
		}
	}
	return out, sc.Err()
}
