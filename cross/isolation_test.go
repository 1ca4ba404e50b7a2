package cross

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/didoedge/didoedge/camera/rtspserver"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/internal/testnet"
)

// isolationRunConfig: three RTSP cameras, every zone critical (the alarm
// calibration) with an update every 500 ms (events keep being written, so
// that a full disk is found), a camera_restart shorter than the test's
// window.
const isolationRunConfig = `cameras:
  - {name: front, url: "rtsp://%[1]s/sim", stall_timeout: 1s, backoff_min: 100ms, backoff_max: 500ms}
  - {name: left, url: "rtsp://%[2]s/sim", stall_timeout: 1s, backoff_min: 100ms, backoff_max: 500ms}
  - {name: right, url: "rtsp://%[3]s/sim", stall_timeout: 1s, backoff_min: 100ms, backoff_max: 500ms}
` + testmodels.RuntimeConfig + `alerts:
  vehicle: sdcar
  grid: {rows: 1, cols: 2}
  calibration: alarm.yaml
  events: {camera_stall: 2s, update_interval: 500ms}
  mqtt: {broker: embedded, client_id: didoedge-sd, close_timeout: 1s}
  outbox: {dir: outbox}
  embedded: {listen: "127.0.0.1:%[4]d", allow_anonymous: true}
http: {listen: "127.0.0.1:%[5]d"}
pipeline: {camera_restart: 3s}
`

// frameCounts reads didoedge_frames_total per camera from /metrics.
func frameCounts(t *testing.T, sb *sandbox) map[string]float64 {
	t.Helper()
	code, body := sb.get("/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d %.200s", code, body)
	}
	return metricValues(body, "didoedge_frames_total")
}

// metricValues returns name's samples by their camera label (the whole
// label set when there is no camera label).
func metricValues(body, name string) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		key, val, _ := strings.Cut(line[len(name):], " ")
		if i := strings.Index(key, `camera="`); i >= 0 {
			key = key[i+8:]
			key = key[:strings.IndexByte(key, '"')]
		}
		v, err := strconv.ParseFloat(val, 64)
		if err == nil {
			out[key] = v
		}
	}
	return out
}

// episodes returns each zone's open episode id of a camera from the debug
// page's state.
func episodes(t *testing.T, sb *sandbox, cam string) []string {
	t.Helper()
	code, body := sb.get("/api/state?camera=" + cam)
	if code != 200 {
		return nil
	}
	var st struct {
		Zones []struct {
			Episode string `json:"episode"`
		} `json:"zones"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("state of %s: %v", cam, err)
	}
	var ids []string
	for _, z := range st.Zones {
		ids = append(ids, z.Episode)
	}
	return ids
}

// mountTmpfs mounts a tmpfs on dir until the test ends. As root that is
// a mount(2); as another user the mount goes through asRoot (passwordless
// sudo, as the sandbox does): a mount(2) would fail with EPERM. The tmpfs
// is then writable by all, so that this test (fillDisk) can fill it.
func mountTmpfs(t *testing.T, asRoot []string, dir, opts string) {
	t.Helper()
	if len(asRoot) == 0 {
		if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, opts+",mode=0755"); err != nil {
			t.Fatalf("mount a tmpfs on %s: %v", dir, err)
		}
		t.Cleanup(func() {
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		})
		return
	}
	run := func(args ...string) error {
		cmd := exec.Command(asRoot[0], append(asRoot[1:], args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %v: %s", args, err, out)
		}
		return nil
	}
	if err := run("mount", "-t", "tmpfs", "-o", opts+",mode=0777", "tmpfs", dir); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := run("umount", "-l", dir); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// fillDisk writes a file into dir until the file system is full.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", dir, err)
			}
			return path
		}
	}
}

// TestUnitIsolationUnderSystemd runs the shipped units under the private
// systemd with three real RTSP cameras, every zone in a critical episode,
// and the outbox on a 1 MiB tmpfs. One camera's server is killed and the
// outbox's disk filled: for three health-check periods past the camera's
// stall limit and its in-process restart, /healthz keeps answering 200
// (degraded: the dead camera and the outbox), the health timer does not
// restart the unit (same MainPID, nothing in its log), the dead camera's
// source is restarted inside the process (didoedge_camera_restarts_total),
// and the other two cameras keep their episodes (same ids) and their frame
// rate (within 10 %). When the disk is freed and the camera returns, the
// service is plainly ok again.
func TestUnitIsolationUnderSystemd(t *testing.T) {
	asRoot := requireSandbox(t)
	work := prepareWork(t)
	os.WriteFile(filepath.Join(work, "alarm.yaml"), []byte(testmodels.AlarmCalibration), 0o644)
	outbox := filepath.Join(work, "outbox")
	mountTmpfs(t, asRoot, outbox, "size=1m")
	var cams [3]*rtspserver.Server
	start := func(i int, addr string) {
		srv, err := rtspserver.New(rtspserver.Config{Addr: addr, Generated: map[string]rtspserver.Generated{"sim": {Source: stripes{}, FPS: 10}},
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		cams[i] = srv
	}
	for i := range cams {
		start(i, "127.0.0.1:0")
	}
	defer func() {
		for _, c := range cams {
			c.Close()
		}
	}()
	brokerPort, httpPort := testnet.FreePort(t), testnet.FreePort(t)
	config := fmt.Sprintf(isolationRunConfig, cams[0].Addr(), cams[1].Addr(), cams[2].Addr(), brokerPort, httpPort)
	os.WriteFile(filepath.Join(work, "run.yaml"), []byte(config), 0o644)
	sb := startSandbox(t, asRoot, work, httpPort)

	sb.waitFor("a healthy service with every episode open", 90*time.Second, func() bool {
		code, body := sb.health()
		if code != 200 || !strings.HasPrefix(body, "ok\n") {
			return false
		}
		for _, cam := range []string{"front", "left", "right"} {
			ids := episodes(t, sb, cam)
			if len(ids) != 2 || ids[0] == "" || ids[1] == "" {
				return false
			}
		}
		return true
	})
	mainPID := sb.mainPID()
	before := map[string]string{"front": strings.Join(episodes(t, sb, "front"), ","), "right": strings.Join(episodes(t, sb, "right"), ",")}
	window := 8 * time.Second
	n0 := frameCounts(t, sb)
	time.Sleep(window)
	n1 := frameCounts(t, sb)
	rate := func(a, b map[string]float64, cam string, d time.Duration) float64 {
		return (b[cam] - a[cam]) / d.Seconds()
	}

	leftAddr := cams[1].Addr()
	cams[1].Close()
	filler := fillDisk(t, outbox)
	killed := time.Now()
	// The camera's stall (2 s) and restart (3 s) limits pass, then three
	// health-check periods (2 s in the sandbox) and more.
	var degradedBody string
	n2 := frameCounts(t, sb)
	t2 := time.Now()
	for time.Since(killed) < 14*time.Second {
		code, body := sb.health()
		if code != 200 {
			t.Fatalf("/healthz %d %v after the kill and the full disk (the timer would restart the unit):\n%s", code, time.Since(killed).Round(time.Millisecond), body)
		}
		if strings.HasPrefix(body, "degraded: camera left, outbox\n") {
			degradedBody = body
		}
		if pid := sb.mainPID(); pid != mainPID {
			t.Fatalf("the unit was restarted (MainPID %s -> %s)", mainPID, pid)
		}
		time.Sleep(500 * time.Millisecond)
	}
	n3 := frameCounts(t, sb)
	d := time.Since(t2)
	if degradedBody == "" {
		_, body := sb.health()
		t.Fatalf("/healthz never said \"degraded: camera left, outbox\"; last:\n%s", body)
	}
	for _, cam := range []string{"front", "right"} {
		r0, r1 := rate(n0, n1, cam, window), rate(n2, n3, cam, d)
		if r0 < 5 || r1/r0-1 < -0.1 || r1/r0-1 > 0.1 {
			t.Errorf("%s: %.2f fps with left dead and the disk full, %.2f before: want within 10%%", cam, r1, r0)
		}
		if got := strings.Join(episodes(t, sb, cam), ","); got != before[cam] {
			t.Errorf("%s's episodes %q, before %q: a healthy camera keeps its episodes", cam, got, before[cam])
		}
		t.Logf("%s: %.2f fps before, %.2f with left dead and the disk full", cam, r0, r1)
	}
	_, metrics := sb.get("/metrics")
	if r := metricValues(metrics, "didoedge_camera_restarts_total"); r["left"] < 1 || r["front"] != 0 || r["right"] != 0 {
		t.Errorf("in-process restarts %v, want left >= 1, the others 0", r)
	}
	if v := metricValues(metrics, "didoedge_outbox_write_fault"); v[""] != 1 {
		t.Errorf("didoedge_outbox_write_fault %v, want 1", v)
	}
	if h, _ := os.ReadFile(filepath.Join(work, "health.log")); strings.Contains(string(h), "restarting") {
		t.Errorf("the health check asked for a restart:\n%s", h)
	}

	os.Remove(filler)
	start(1, leftAddr)
	sb.waitFor("a plainly healthy service after the disk is freed and the camera is back", 60*time.Second, func() bool {
		code, body := sb.health()
		return code == 200 && strings.HasPrefix(body, "ok\n")
	})
	if pid := sb.mainPID(); pid != mainPID {
		t.Fatalf("the unit was restarted (MainPID %s -> %s)", mainPID, pid)
	}
	t.Logf("one camera of three dead and the outbox disk full for %v: /healthz 200 (degraded), no unit restart, left restarted in process", 14*time.Second)
}
