package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/auxue/onnx"
)

// writeDemoTestModels writes random-weight models in the reference layout
// at 32x64 (the demo's camera takes the depth model's input size).
func writeDemoTestModels(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	unet, err := onnx.NewTinyUNet(4, rand.New(rand.NewPCG(7, 1)))
	if err != nil {
		t.Fatal(err)
	}
	dm, err := unet.Export([]int64{1, 3, 32, 64})
	if err != nil {
		t.Fatal(err)
	}
	am, err := auxue.NewModel(auxue.Config{Form: auxue.FormDense, In: 4, EncoderWidth: 4, SharedEncoder: true, Hidden: 4, K: 8, Lambda: 0.01, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	ax, err := onnx.ExportAuxUE(am, []int64{1, 4, 32, 64})
	if err != nil {
		t.Fatal(err)
	}
	if err := onnx.WriteFile(filepath.Join(dir, "depth.onnx"), dm); err != nil {
		t.Fatal(err)
	}
	if err := onnx.WriteFile(filepath.Join(dir, "auxue.onnx"), ax); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "depth.yaml"), []byte("input: {name: image, height: 32, width: 64}\ndepth: {name: depth, meaning: metric_depth}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "MANIFEST"), []byte("test models with random weights\n"), 0o644)
	return dir
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestDemoExternalBroker runs `didoedge demo --mqtt` against a real
// mosquitto on 127.0.0.1 for a few seconds: the simulated RTSP camera, the
// pipeline and the publisher run, the events printed on stdout reach a
// mosquitto_sub subscriber, and the demo stops by itself (--duration).
// The models have random weights: every zone alarms, which is what makes
// events appear here (the meaning of the alarms is tested with the
// reference models in runtime/demo).
func TestDemoExternalBroker(t *testing.T) {
	models := writeDemoTestModels(t)
	port := freePort(t)
	conf := filepath.Join(t.TempDir(), "mosquitto.conf")
	os.WriteFile(conf, []byte(fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\npersistence false\n", port)), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	broker := exec.CommandContext(ctx, "/usr/sbin/mosquitto", "-c", conf)
	if err := broker.Start(); err != nil {
		t.Fatalf("mosquitto (run bash scripts/deps.sh): %v", err)
	}
	defer func() { syscall.Kill(broker.Process.Pid, syscall.SIGTERM); broker.Wait() }()
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			break
		}
		if i > 100 {
			t.Fatal("mosquitto did not listen")
		}
		time.Sleep(50 * time.Millisecond)
	}
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
		"debug page http://127.0.0.1:", "scene  outdoor", " NEW "} {
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
