package cross

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/didoedge/didoedge/camera/rtspserver"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/internal/testnet"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

type stripes struct{}

func (stripes) Size() (int, int) { return 64, 32 }

func (stripes) Render(index int, rgb []uint8) error {
	for i := range rgb {
		rgb[i] = uint8(i/5 + 3*index)
	}
	return nil
}

const sandboxRunConfig = `camera:
  url: rtsp://%s/sim
  stall_timeout: 1s
  backoff_min: 100ms
  backoff_max: 500ms
` + testmodels.RuntimeConfig + `alerts:
  vehicle: sdcar
  camera: front
  grid: {rows: 1, cols: 2}
  calibration: %s
  events: {camera_stall: 2s}
  mqtt: {broker: embedded, client_id: didoedge-sd, close_timeout: 1s}
  outbox: {dir: outbox}
  embedded: {listen: "127.0.0.1:%d", allow_anonymous: true}
http: {listen: "127.0.0.1:%d"}
`

const (
	calA = "version: 1\ntau_e: 0.5\ntau_a: 1000\nscale_correction: 1\ncoverage: 0.9\nlevels:\n  ood_fraction: {warn: {enter: 0.5, exit: 0.4}, critical: {enter: 0.9, exit: 0.8}}\n"
	calB = "version: 1\ntau_e: 0.7\ntau_a: 1000\nscale_correction: 1\ncoverage: 0.9\nlevels:\n  ood_fraction: {warn: {enter: 0.5, exit: 0.4}, critical: {enter: 0.9, exit: 0.8}}\n"
)

// sandboxUnits copies the three shipped units and adds what a test needs
// around them, as drop-ins, so that the shipped files run unchanged: the
// binary and config of the test, root instead of the didoedge user (the
// host's passwd is not the test's to change), the test's outbox as the
// only writable path, the logs in files (no journald in the sandbox), and
// a health timer every 2 s instead of 30 s.
func sandboxUnits(t *testing.T, units string, httpPort int) {
	t.Helper()
	os.MkdirAll(units, 0o755)
	for _, name := range unitFiles {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(units, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"didoedge-test.target": "[Unit]\nDescription=didoedge sandbox\nWants=didoedge.service didoedge-health.timer\n",
		"didoedge.service.d/sandbox.conf": `[Service]
User=
Group=
SupplementaryGroups=
ExecStart=
ExecStart=/run/didoedge-test/didoedge run --config /run/didoedge-test/run.yaml
ReadWritePaths=
ReadWritePaths=/run/didoedge-test/outbox
Environment=ONNXRUNTIME_LIB=/run/didoedge-test/libonnxruntime.so.1
StandardOutput=append:/run/didoedge-test/didoedge.log
StandardError=inherit
RestartSec=1s
`,
		"didoedge-health.service.d/sandbox.conf": fmt.Sprintf(`[Service]
Environment=DIDOEDGE_HEALTH_URL=http://127.0.0.1:%d/healthz
StandardOutput=append:/run/didoedge-test/health.log
StandardError=inherit
`, httpPort),
		"didoedge-health.timer.d/sandbox.conf": "[Timer]\n# An empty assignment resets every trigger of the timer.\nOnActiveSec=\nOnActiveSec=2s\nOnUnitActiveSec=2s\nAccuracySec=100ms\n",
	}
	for name, body := range files {
		p := filepath.Join(units, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, mode); err != nil {
		t.Fatal(err)
	}
}

// findSystemd returns the host PID of the sandbox's systemd.
func findSystemd(target string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(cmd), "\x00")
		if len(args) > 1 && strings.HasSuffix(args[0], "/systemd") && strings.Contains(string(cmd), "--unit="+target) {
			return pid
		}
	}
	return 0
}

// sandbox is a private systemd running the shipped units on a work
// directory (see startSandbox).
type sandbox struct {
	t        *testing.T
	work     string
	httpPort int
	sdPID    int
	asRoot   []string
	sdLog    *bytes.Buffer
}

// requireSandbox checks what a sandbox needs: root (or passwordless sudo)
// and the tools.
func requireSandbox(t *testing.T) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts systemd and the runtime")
	}
	// The sandbox needs root (namespaces, mounts, a cgroup); as another
	// user it runs through passwordless sudo, as scripts/deps.sh does.
	var asRoot []string
	if os.Geteuid() != 0 {
		if err := exec.Command("sudo", "-n", "true").Run(); err != nil {
			t.Fatal("needs root, or passwordless sudo, to run systemd in its own namespaces (cross/systemd-sandbox.sh)")
		}
		asRoot = []string{"sudo", "-n"}
	}
	for _, tool := range []string{"/usr/lib/systemd/systemd", "unshare", "nsenter", "curl", "systemctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed (scripts/deps.sh installs systemd, util-linux and curl): %v", tool, err)
		}
	}
	return asRoot
}

// prepareWork builds the didoedge binary of this tree into a new work
// directory with the ONNX Runtime library and the seeded test models.
func prepareWork(t *testing.T) string {
	t.Helper()
	work := t.TempDir()
	os.Chmod(work, 0o755)
	build := exec.Command("go", "build", "-o", filepath.Join(work, "didoedge"), "../cmd/didoedge")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	lib, err := onnxrt.ResolveLibrary("")
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, lib.Path, filepath.Join(work, "libonnxruntime.so.1"), 0o755)
	testmodels.Write(t, work)
	os.MkdirAll(filepath.Join(work, "outbox"), 0o755)
	return work
}

// startSandbox runs the shipped units (with sandboxUnits' drop-ins) under
// a private systemd on work (run.yaml written by the caller); it is
// stopped (killed by its PID) at the end of the test.
func startSandbox(t *testing.T, asRoot []string, work string, httpPort int) *sandbox {
	t.Helper()
	sandboxUnits(t, filepath.Join(work, "units"), httpPort)
	sb := &sandbox{t: t, work: work, httpPort: httpPort, asRoot: asRoot, sdLog: &bytes.Buffer{}}
	target := "didoedge-test.target"
	cmd := sb.root("./systemd-sandbox.sh", work, "units", target)
	cmd.Stdout, cmd.Stderr = sb.sdLog, sb.sdLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(sb.logs())
		}
		if sb.sdPID != 0 {
			if asRoot == nil {
				syscall.Kill(sb.sdPID, syscall.SIGKILL)
			} else {
				sb.root("kill", "-9", strconv.Itoa(sb.sdPID)).Run()
			}
			sb.sdPID = 0
		}
		cmd.Wait()
	})
	for deadline := time.Now().Add(20 * time.Second); sb.sdPID == 0; time.Sleep(100 * time.Millisecond) {
		if sb.sdPID = findSystemd(target); sb.sdPID == 0 && time.Now().After(deadline) {
			t.Fatalf("systemd did not start:\n%s", sb.sdLog.String())
		}
	}
	return sb
}

func (sb *sandbox) root(name string, args ...string) *exec.Cmd {
	all := append(append(append([]string(nil), sb.asRoot...), name), args...)
	return exec.Command(all[0], all[1:]...)
}

func (sb *sandbox) logs() string {
	d, _ := os.ReadFile(filepath.Join(sb.work, "didoedge.log"))
	h, _ := os.ReadFile(filepath.Join(sb.work, "health.log"))
	return fmt.Sprintf("systemd:\n%s\ndidoedge.log:\n%s\nhealth.log:\n%s", sb.sdLog.String(), d, h)
}

func (sb *sandbox) systemctl(args ...string) string {
	sb.t.Helper()
	out, err := sb.root("nsenter", append([]string{"-t", strconv.Itoa(sb.sdPID), "-m", "-p", "systemctl", "--no-pager"}, args...)...).CombinedOutput()
	if err != nil && args[0] != "status" && args[0] != "is-active" {
		sb.t.Fatalf("systemctl %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (sb *sandbox) mainPID() string {
	return sb.systemctl("show", "-p", "MainPID", "--value", "didoedge.service")
}

// get fetches path from the service's HTTP server.
func (sb *sandbox) get(path string) (int, string) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", sb.httpPort, path))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (sb *sandbox) health() (int, string) { return sb.get("/healthz") }

func (sb *sandbox) waitFor(what string, timeout time.Duration, cond func() bool) {
	sb.t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			code, body := sb.health()
			sb.t.Fatalf("timed out after %v waiting for %s (healthz %d %q; units:\n%s\n%s)", timeout, what, code, body,
				sb.systemctl("status", "didoedge.service", "didoedge-health.timer", "didoedge-health.service"), sb.systemctl("list-timers", "--all"))
		}
	}
}

// TestUnitsUnderSystemd runs the shipped units (didoedge.service with its
// hardening and syscall filter, the health service and timer) under a
// private systemd 252 (cross/systemd-sandbox.sh: systemd as PID 1 of its
// own namespaces, the units' directory as its only unit path), with the
// didoedge binary built from this tree, seeded test models and a real RTSP
// camera on 127.0.0.1. It checks that the service starts and is healthy
// under the filter, that `systemctl reload` sends SIGHUP and reloads, and
// that the health timer restarts the service when the pipeline dies while
// the process lives (its only camera goes away, so no camera has frames:
// the whole pipeline is stuck and /healthz fails on frames), and that the
// restarted service is healthy again once the camera is back.
// TestUnitIsolationUnderSystemd checks the other side of the rule: one
// dead camera of three, or a full disk, does not restart the unit.
func TestUnitsUnderSystemd(t *testing.T) {
	asRoot := requireSandbox(t)
	work := prepareWork(t)
	os.WriteFile(filepath.Join(work, "cal.yaml"), []byte(calA), 0o644)

	cam, err := rtspserver.New(rtspserver.Config{Addr: "127.0.0.1:0", Generated: map[string]rtspserver.Generated{"sim": {Source: stripes{}, FPS: 10}},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := cam.Start(); err != nil {
		t.Fatal(err)
	}
	defer cam.Close()
	brokerPort, httpPort := testnet.FreePort(t), testnet.FreePort(t)
	config := fmt.Sprintf(sandboxRunConfig, cam.Addr(), "cal.yaml", brokerPort, httpPort)
	os.WriteFile(filepath.Join(work, "run.yaml"), []byte(config), 0o644)
	sb := startSandbox(t, asRoot, work, httpPort)
	systemctl, health, waitFor := sb.systemctl, sb.health, sb.waitFor
	root := func(name string, args ...string) *exec.Cmd { return sb.root(name, args...) }
	sdPID := sb.sdPID
	healthy := func() bool {
		code, body := health()
		return code == 200 && strings.HasPrefix(body, "ok\n") && strings.Contains(body, "frames: ok")
	}
	waitFor("a healthy service", 90*time.Second, healthy)
	mainPID := systemctl("show", "-p", "MainPID", "--value", "didoedge.service")
	filter := systemctl("show", "-p", "SystemCallFilter", "--value", "didoedge.service")
	status, _ := root("nsenter", "-t", strconv.Itoa(sdPID), "-m", "-p", "cat", "/proc/"+mainPID+"/status").Output()
	if !regexp.MustCompile(`(?m)^Seccomp:\s+2$`).Match(status) || !strings.Contains(filter, "openat") {
		t.Fatalf("the service does not run under its syscall filter (Seccomp mode %q, filter %.80q)",
			regexp.MustCompile(`(?m)^Seccomp:.*$`).Find(status), filter)
	}

	// systemctl reload: SIGHUP, a new calibration, the pipeline keeps going.
	os.WriteFile(filepath.Join(work, "cal.yaml"), []byte(calB), 0o644)
	systemctl("reload", "didoedge.service")
	waitFor("the reload in the service log", 20*time.Second, func() bool {
		d, _ := os.ReadFile(filepath.Join(work, "didoedge.log"))
		return bytes.Contains(d, []byte("SIGHUP: reloading")) && bytes.Contains(d, []byte("reloaded zones and thresholds"))
	})
	if pid := systemctl("show", "-p", "MainPID", "--value", "didoedge.service"); pid != mainPID {
		t.Fatalf("reload restarted the service (MainPID %s -> %s)", mainPID, pid)
	}

	// The pipeline dies, the process lives: the camera goes away.
	cam.Close()
	waitFor("/healthz failing on frames", 20*time.Second, func() bool {
		code, body := health()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "frames: FAIL")
	})
	died := time.Now()
	waitFor("the health timer restarting the service", 90*time.Second, func() bool {
		pid := systemctl("show", "-p", "MainPID", "--value", "didoedge.service")
		return pid != mainPID && pid != "0"
	})
	restartAfter := time.Since(died)
	h, _ := os.ReadFile(filepath.Join(work, "health.log"))
	if !bytes.Contains(h, []byte("failed, restarting didoedge.service")) {
		t.Fatalf("the service restarted, but not by the health check:\n%s", h)
	}
	if err := cam.Start(); err != nil { // same address
		t.Fatal(err)
	}
	waitFor("a healthy service after the restart", 90*time.Second, healthy)
	t.Logf("under systemd %s: healthy with the syscall filter, reload by SIGHUP, dead pipeline restarted by the health timer %v after /healthz failed, healthy again with the camera back",
		strings.Fields(systemctl("--version"))[1], restartAfter.Round(time.Second))
}
