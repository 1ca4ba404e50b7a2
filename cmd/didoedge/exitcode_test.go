package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts/outbox"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/internal/testnet"
)

// TestSIGTERMWithBrokerDownExitsZero: `didoedge run` publishing to an
// external broker that is down (nothing listens on its port) raises
// events; SIGTERM stops it. The events are safe in the outbox: the exit
// code is 0 (issue 29: it was 1, "N events not acknowledged", and systemd
// marked the unit failed), the log says how many are kept for the next
// start, and the outbox holds exactly that many.
func TestSIGTERMWithBrokerDownExitsZero(t *testing.T) {
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
		os.WriteFile(filepath.Join(frames, fmt.Sprintf("%03d.png", i)), b.Bytes(), 0o644)
	}
	testmodels.Write(t, dir)
	os.WriteFile(filepath.Join(dir, "alarm.yaml"), []byte(alarmCal), 0o644)
	down := fmt.Sprintf("tcp://127.0.0.1:%d", testnet.FreePort(t))
	cfg := strings.Replace(fmt.Sprintf(signalsConfig, "alarm.yaml"),
		"mqtt: {broker: embedded, client_id: didoedge-sig, close_timeout: 5s}",
		"mqtt: {broker: \""+down+"\", client_id: didoedge-sig, close_timeout: 1s}", 1)
	cfgPath := filepath.Join(dir, "run.yaml")
	os.WriteFile(cfgPath, []byte(cfg), 0o644)

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
	var mu sync.Mutex
	news := 0
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), " NEW ") {
				mu.Lock()
				news++
				mu.Unlock()
			}
		}
	}()
	for {
		mu.Lock()
		n := news
		mu.Unlock()
		if n >= 2 {
			break
		}
		if ctx.Err() != nil {
			cmd.Process.Kill()
			t.Fatalf("no events; stderr:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM with the broker down: %v; stderr:\n%s", err, stderr.String())
	}
	m := regexp.MustCompile(`kept in the outbox for the next start.* kept=(\d+)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("the log does not say how many events are kept:\n%s", stderr.String())
	}
	kept, _ := strconv.Atoi(m[1])
	box, err := outbox.Open(outbox.Options{Dir: filepath.Join(dir, "outbox"), MaxBytes: 64 << 20, MaxRecords: 100000, SegmentBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	// The engines end their open episodes at the stop: 2 new + 2 end at least.
	if st := box.Stats(); kept < 4 || st.Pending != kept {
		t.Fatalf("log says %d kept, the outbox holds %d; want the same, at least 4", kept, st.Pending)
	}
}
