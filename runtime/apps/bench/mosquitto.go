package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Mosquitto is a mosquitto broker process on 127.0.0.1, started for a
// measurement and stopped by its PID.
type Mosquitto struct {
	Addr string // host:port
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// FindMosquitto looks for the mosquitto binary on PATH, then in /usr/sbin.
func FindMosquitto() (string, error) {
	if p, err := exec.LookPath("mosquitto"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/mosquitto"); err == nil {
		return "/usr/sbin/mosquitto", nil
	}
	return "", errors.New("mosquitto not found on PATH or in /usr/sbin (apt-get install mosquitto, or bash scripts/deps.sh)")
}

// StartMosquitto runs bin with a config in dir: one listener on a free
// port of 127.0.0.1, anonymous clients, no persistence. It returns once
// the port accepts connections.
func StartMosquitto(ctx context.Context, bin, dir string) (*Mosquitto, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	conf := filepath.Join(dir, "mosquitto.conf")
	body := fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\npersistence false\nlog_dest stderr\nlog_type error\nlog_type warning\n", port)
	if os.Geteuid() == 0 {
		body += "user root\n"
	}
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		return nil, err
	}
	m := &Mosquitto{Addr: "127.0.0.1:" + strconv.Itoa(port), done: make(chan struct{})}
	if m.log, err = os.Create(filepath.Join(dir, "mosquitto.log")); err != nil {
		return nil, err
	}
	m.cmd = exec.Command(bin, "-c", conf)
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		m.log.Close()
		return nil, fmt.Errorf("start mosquitto: %w", err)
	}
	go func() { m.cmd.Wait(); close(m.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", m.Addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return m, nil
		}
		select {
		case <-m.done:
			m.log.Close()
			b, _ := os.ReadFile(m.log.Name())
			return nil, fmt.Errorf("mosquitto exited at start: %s", b)
		case <-ctx.Done():
			m.Stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.Stop()
			return nil, fmt.Errorf("mosquitto did not listen on %s within 10 s", m.Addr)
		}
	}
}

// Stop ends the broker by its PID (SIGTERM, then SIGKILL after 5 s).
func (m *Mosquitto) Stop() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(5 * time.Second):
		m.cmd.Process.Kill()
		<-m.done
	}
	m.log.Close()
}
