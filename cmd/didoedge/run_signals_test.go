package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts/outbox"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/internal/testmodels"
)

// TestHelperProcessRuntime is not a test: TestRunSignals runs the test
// binary with DIDOEDGE_HELPER_ARGS set, and this function then acts as
// the didoedge binary (real process, real signals).
func TestHelperProcessRuntime(t *testing.T) {
	args := os.Getenv("DIDOEDGE_HELPER_ARGS")
	if args == "" {
		return
	}
	os.Args = append([]string{"didoedge"}, strings.Split(args, "\x1f")...)
	main()
}

const signalsConfig = `camera:
  sequence: {dir: frames, fps: 10, loop: true}
` + testmodels.RuntimeConfig + `alerts:
  vehicle: sigcar
  camera: front
  calibration: %s
  grid: {rows: 1, cols: 2}
  events: {fusion_time_constant: 0s, exit_inertia: 0s, min_episode: 0s, merge_window: 0s, camera_stall: 0s}
  mqtt: {broker: embedded, client_id: didoedge-sig, close_timeout: 5s}
  outbox: {dir: outbox}
  embedded: {listen: "127.0.0.1:0", allow_anonymous: true}
http: {listen: "127.0.0.1:0"}
`

const (
	alarmCal = "version: 1\ntau_e: 0.000001\ntau_a: 1000\nscale_correction: 1\ncoverage: 0.9\nlevels:\n  ood_fraction: {warn: {enter: 0.5, exit: 0.4}, critical: {enter: 0.9, exit: 0.8}}\n"
	quietCal = "version: 1\ntau_e: 1\ntau_a: 1000\nscale_correction: 1\ncoverage: 0.9\nlevels:\n  ood_fraction: {warn: {enter: 0.5, exit: 0.4}, critical: {enter: 0.9, exit: 0.8}}\n"
)

// signalsCamerasConfig is signalsConfig with two cameras on the same
// frames, both on the alerts section's calibration and zones.
var signalsCamerasConfig = strings.Replace(strings.Replace(signalsConfig,
	"camera:\n  sequence: {dir: frames, fps: 10, loop: true}\n",
	"cameras:\n  - {name: front, sequence: {dir: frames, fps: 10, loop: true}}\n  - {name: rear, sequence: {dir: frames, fps: 10, loop: true}}\n", 1),
	"  camera: front\n", "", 1)

// TestRunSignals runs `didoedge run` as a process on an image sequence,
// with one camera and with two: events are printed, SIGHUP swaps in a
// quiet calibration (every camera's open episodes end), SIGTERM stops it
// with exit code 0 and an empty outbox.
func TestRunSignals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		config  string
		cameras int
	}{{"one camera", signalsConfig, 1}, {"two cameras", signalsCamerasConfig, 2}} {
		t.Run(tc.name, func(t *testing.T) { runSignals(t, tc.config, tc.cameras) })
	}
}

func runSignals(t *testing.T, signalsConfig string, cameras int) {
	dir := t.TempDir()
	frames := filepath.Join(dir, "frames")
	os.MkdirAll(frames, 0o755)
	rgb := make([]uint8, 64*32*3)
	for i := range 4 {
		for j := range rgb {
			rgb[j] = uint8(j*5 + 40*i)
		}
		var b bytes.Buffer
		if err := dataset.EncodeRGBPNG(&b, 64, 32, rgb); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(frames, fmt.Sprintf("%03d.png", i)), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	testmodels.Write(t, dir)
	os.WriteFile(filepath.Join(dir, "alarm.yaml"), []byte(alarmCal), 0o644)
	os.WriteFile(filepath.Join(dir, "quiet.yaml"), []byte(quietCal), 0o644)
	cfgPath := filepath.Join(dir, "run.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(signalsConfig, "alarm.yaml")), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcessRuntime$")
	cmd.Env = append(os.Environ(), "DIDOEDGE_HELPER_ARGS=run\x1f--config\x1f"+cfgPath)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	var mu sync.Mutex
	var lines []string
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	count := func(kind string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, l := range lines {
			if strings.Contains(l, " "+kind+" ") {
				n++
			}
		}
		return n
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("timed out waiting for %s; stdout %q; stderr:\n%s", what, lines, stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	zones := 2 * cameras // every camera's two zones
	wait("a NEW event per zone", func() bool { return count("NEW") >= zones })

	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(signalsConfig, "quiet.yaml")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	wait("an END event per zone after SIGHUP", func() bool { return count("END") >= zones })

	// A config that does not load is refused, logged once, the run goes on.
	good, _ := os.ReadFile(cfgPath)
	os.WriteFile(cfgPath, []byte("alerts: [\n"), 0o644)
	syscall.Kill(pid, syscall.SIGHUP)
	wait("the failed reload in the log", func() bool { return strings.Contains(stderr.String(), "reload failed") })
	time.Sleep(300 * time.Millisecond)
	if n := strings.Count(stderr.String(), "level=ERROR"); n != 1 {
		t.Fatalf("%d ERROR lines for one failed reload, want 1:\n%s", n, stderr.String())
	}
	os.WriteFile(cfgPath, good, 0o644)

	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("no exit 20 s after SIGTERM; stderr:\n%s", stderr.String())
	}
	t.Logf("stdout: %q", lines)
	if count("NEW") != zones {
		t.Fatalf("NEW events after the quiet reload: %q", lines)
	}
	if !strings.Contains(stderr.String(), "reloaded zones and thresholds") || !strings.Contains(stderr.String(), "draining the pipeline") {
		t.Fatalf("stderr lacks the reload or drain log:\n%s", stderr.String())
	}
	box, err := outbox.Open(outbox.Options{Dir: filepath.Join(dir, "outbox"), MaxBytes: 64 << 20, MaxRecords: 100000, SegmentBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	if st := box.Stats(); st.Pending != 0 {
		t.Fatalf("%d events left in the outbox after SIGTERM", st.Pending)
	}
}
