package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/didoedge/didoedge/camera/rtspserver"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/internal/testnet"
)

type stripes struct{}

func (stripes) Size() (int, int) { return 64, 32 }

func (stripes) Render(index int, rgb []uint8) error {
	for i := range rgb {
		rgb[i] = uint8(i/7 + index)
	}
	return nil
}

const secretsConfig = `camera:
  url: rtsp://admin:%s@%s/sim
  stall_timeout: 1s
  backoff_min: 100ms
  backoff_max: 300ms
` + testmodels.RuntimeConfig + `alerts:
  vehicle: secretcar
  camera: front
  grid: {rows: 1, cols: 2}
  events: {camera_stall: 1s}
  mqtt: {broker: "tcp://127.0.0.1:%d", client_id: secret-test, username: veh, password_file: mqtt-password, keepalive: 1s, close_timeout: 1s}
  outbox: {dir: outbox}
http: {listen: "127.0.0.1:%d"}
`

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSecretsNeverLogged runs `didoedge run` with a password in the RTSP
// URL and an MQTT password (file) against a real mosquitto that checks it,
// then makes both fail (the camera server stops, the broker stops) so that
// every error path logs, and reads /metrics, /api/state, /healthz and the
// page. No log line, page or printed event holds either password; the
// camera URL appears redacted. A password in the MQTT URL is refused with
// a message naming the keys to use, without the password.
func TestSecretsNeverLogged(t *testing.T) {
	const camPW, mqttPW = "S3cretCamPw", "S3cretMqttPw"
	dir := t.TempDir()
	testmodels.Write(t, dir)
	os.WriteFile(filepath.Join(dir, "mqtt-password"), []byte(mqttPW+"\n"), 0o600)

	cam, err := rtspserver.New(rtspserver.Config{Addr: "127.0.0.1:0", Generated: map[string]rtspserver.Generated{"sim": {Source: stripes{}, FPS: 10}},
		Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := cam.Start(); err != nil {
		t.Fatal(err)
	}
	defer cam.Close()

	port, httpPort := testnet.FreePort(t), testnet.FreePort(t)
	pwFile := filepath.Join(dir, "mosquitto.pw")
	if out, err := exec.Command("/usr/bin/mosquitto_passwd", "-b", "-c", pwFile, "veh", mqttPW).CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_passwd (scripts/deps.sh installs mosquitto): %v %s", err, out)
	}
	conf := filepath.Join(dir, "mosquitto.conf")
	body := fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous false\npassword_file %s\npersistence false\n", port, pwFile)
	if os.Geteuid() == 0 {
		body += "user root\n"
	}
	os.WriteFile(conf, []byte(body), 0o600)
	var brokerLog lockedBuffer
	startBroker := func() *exec.Cmd {
		b := exec.Command("/usr/sbin/mosquitto", "-c", conf)
		b.Stdout, b.Stderr = &brokerLog, &brokerLog
		if err := b.Start(); err != nil {
			t.Fatalf("mosquitto: %v", err)
		}
		testnet.WaitListening(t, port, 5*time.Second)
		return b
	}
	stopBroker := func(b *exec.Cmd) {
		b.Process.Signal(syscall.SIGTERM)
		b.Wait()
	}
	broker := startBroker()
	defer func() { stopBroker(broker) }()

	cfg := filepath.Join(dir, "run.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(secretsConfig, camPW, cam.Addr(), port, httpPort)), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcessRuntime$")
	cmd.Env = append(os.Environ(), "DIDOEDGE_HELPER_ARGS=run\x1f--config\x1f"+cfg)
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	get := func(path string) string {
		resp, err := http.Get(base + path)
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	waitLog := func(what string) {
		t.Helper()
		for !strings.Contains(stderr.String(), what) {
			if ctx.Err() != nil {
				t.Fatalf("no %q in the log:\n%s", what, stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitLog("mqtt connected")
	for !strings.Contains(get("/metrics"), "didoedge_frames_total") || strings.Contains(get("/metrics"), "didoedge_frames_total 0\n") {
		if ctx.Err() != nil {
			t.Fatalf("no frames:\n%s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	pages := []string{get("/metrics"), get("/api/state"), get("/healthz"), get("/")}
	cam.Close() // the camera goes away: session errors, stall, reconnects
	waitLog("camera session ended")
	stopBroker(broker) // the broker goes away: connection lost, reconnects
	waitLog("mqtt connection lost")
	time.Sleep(1500 * time.Millisecond)
	pages = append(pages, get("/metrics"), get("/api/state"), get("/healthz"))
	broker = startBroker()
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()

	everything := stderr.String() + stdout.String() + strings.Join(pages, "\n")
	lines := strings.Split(stderr.String(), "\n")
	for _, secret := range []string{camPW, mqttPW} {
		if strings.Contains(everything, secret) {
			for _, l := range lines {
				if strings.Contains(l, secret) {
					t.Errorf("secret in a log line: %s", l)
				}
			}
			t.Fatalf("secret %q appears in the run's output or pages", secret)
		}
	}
	if !strings.Contains(stderr.String(), "rtsp://***@"+cam.Addr()+"/sim") {
		t.Errorf("the camera URL never appears redacted in the log:\n%s", stderr.String())
	}
	t.Logf("%d log lines and %d pages checked for both passwords", len(lines), len(pages))

	// A password in the MQTT URL is refused, the message points to the keys.
	bad := strings.Replace(fmt.Sprintf(secretsConfig, camPW, cam.Addr(), port, httpPort),
		fmt.Sprintf("tcp://127.0.0.1:%d", port), fmt.Sprintf("tcp://veh:%s@127.0.0.1:%d", mqttPW, port), 1)
	os.WriteFile(cfg, []byte(bad), 0o644)
	code, out := runProcess(t, 30*time.Second, "run", "--config", cfg)
	if code != 1 || strings.Contains(out, mqttPW) || !strings.Contains(out, "mqtt.username and mqtt.password_file") {
		t.Fatalf("password in the MQTT URL: exit %d:\n%s", code, out)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
