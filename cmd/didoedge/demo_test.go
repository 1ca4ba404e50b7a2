package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/internal/testnet"
)

// TestDemoExternalBroker runs `didoedge demo --mqtt` against a real
// mosquitto on 127.0.0.1 for a few seconds: the simulated RTSP camera, the
// pipeline and the publisher run, the events printed on stdout reach a
// mosquitto_sub subscriber, and the demo stops by itself (--duration).
// The models have random weights: every zone alarms, which is what makes
// events appear here (the meaning of the alarms is tested with the
// reference models in runtime/apps/demo).
func TestDemoExternalBroker(t *testing.T) {
	// random-weight models in the reference layout at 32x64 (the demo's
	// camera takes the depth model's input size)
	models := t.TempDir()
	testmodels.WriteReference(t, models)
	port := testnet.FreePort(t)
	conf := filepath.Join(t.TempDir(), "mosquitto.conf")
	os.WriteFile(conf, []byte(fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\npersistence false\n", port)), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	broker := exec.CommandContext(ctx, "/usr/sbin/mosquitto", "-c", conf)
	if err := broker.Start(); err != nil {
		t.Fatalf("mosquitto (run bash scripts/deps.sh): %v", err)
	}
	defer func() { syscall.Kill(broker.Process.Pid, syscall.SIGTERM); broker.Wait() }()
	testnet.WaitListening(t, port, 5*time.Second)
	var subOut bytes.Buffer
	sub := exec.CommandContext(ctx, "/usr/bin/mosquitto_sub", "-h", "127.0.0.1", "-p", fmt.Sprint(port),
		"-t", "didoedge/demo/front/events", "-q", "1", "-W", "30")
	sub.Stdout = &subOut
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	subDone := false
	defer func() {
		if !subDone {
			syscall.Kill(sub.Process.Pid, syscall.SIGTERM)
			sub.Wait()
		}
	}()
	time.Sleep(300 * time.Millisecond) // the subscription is in place

	env, stdout, errb := modelTestEnv()
	code := run(ctx, env, []string{"demo", "--models", models, "--duration", "6s", "--http", "127.0.0.1:0", "--calibrate-frames", "0",
		"--mqtt", fmt.Sprintf("tcp://127.0.0.1:%d", port)})
	if code != 0 {
		t.Fatalf("demo exit %d: %s", code, errb)
	}
	out := stdout.String()
	for _, want := range []string{"simulated camera rtsp://127.0.0.1:", "/sim (64x32, 15 fps)", fmt.Sprintf("publishing to tcp://127.0.0.1:%d", port),
		"debug page http://127.0.0.1:", "scene  outdoor", " NEW ", " fused ood=", " zones  ego_lane_near=", " road_ahead="} {
		if !strings.Contains(out, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, out)
		}
	}
	time.Sleep(500 * time.Millisecond)
	syscall.Kill(sub.Process.Pid, syscall.SIGTERM)
	sub.Wait()
	subDone = true
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(subOut.String()), "\n") {
		var ev struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("mosquitto_sub received %q: %v", line, err)
		}
		ids = append(ids, ev.ID)
	}
	if len(ids) == 0 {
		t.Fatal("mosquitto_sub received no event")
	}
	for _, id := range ids {
		if !strings.Contains(out, "id="+id) {
			t.Fatalf("event %s received by mosquitto_sub was not printed by the demo:\n%s", id, out)
		}
	}
}

// TestDemoCameras runs `didoedge demo --cameras 3`: one runtime serves the
// simulated rig (front, left, right with their headings and seeds), every
// camera's events are printed with its name, and the zone lines name the
// camera. (Random weights: every zone of every camera alarms.)
func TestDemoCameras(t *testing.T) {
	models := t.TempDir()
	testmodels.WriteReference(t, models)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env, stdout, errb := modelTestEnv()
	code := run(ctx, env, []string{"demo", "--models", models, "--cameras", "3", "--duration", "6s", "--http", "127.0.0.1:0",
		"--broker", "127.0.0.1:0", "--calibrate-frames", "0", "--zones-every", "1s"})
	if code != 0 {
		t.Fatalf("demo exit %d: %s", code, errb)
	}
	out := stdout.String()
	for _, want := range []string{
		"simulated camera front rtsp://127.0.0.1:", "/front (heading +0 deg, seed 1, 64x32, 15 fps)",
		"simulated camera left rtsp://127.0.0.1:", "/left (heading -30 deg, seed 2, 64x32, 15 fps)",
		"simulated camera right rtsp://127.0.0.1:", "/right (heading +30 deg, seed 3, 64x32, 15 fps)",
		" NEW    critical camera=front ", " NEW    critical camera=left ", " NEW    critical camera=right ",
		"\nfront ", "\nleft ", "\nright ", " zones  ego_lane_near="} {
		if !strings.Contains(out, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, out)
		}
	}
	if code := run(ctx, env, []string{"demo", "--models", models, "--cameras", "9"}); code == 0 || !strings.Contains(errb.String(), "--cameras 9: want 1..8") {
		t.Fatalf("--cameras 9: exit %d, %s", code, errb)
	}
}
