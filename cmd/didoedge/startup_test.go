package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts/outbox"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/internal/testmodels"
)

const startupConfig = `camera:
  sequence: {dir: frames, fps: 10, loop: true}
` + testmodels.RuntimeConfig + `alerts:
  vehicle: startcar
  camera: front
  grid: {rows: 1, cols: 2}
  mqtt: {broker: embedded, client_id: didoedge-start, close_timeout: 1s}
  outbox: {dir: outbox}
  embedded: {listen: "%s", allow_anonymous: true}
http: {listen: "%s"}
`

// startupDir writes seeded test models, four frames and a run config
// (embedded broker on brokerAddr, HTTP on httpAddr) into a new directory.
func startupDir(t *testing.T, brokerAddr, httpAddr string) (dir, cfg string) {
	t.Helper()
	dir = t.TempDir()
	frames := filepath.Join(dir, "frames")
	os.MkdirAll(frames, 0o755)
	rgb := make([]uint8, 64*32*3)
	for i := range 4 {
		for j := range rgb {
			rgb[j] = uint8(j*3 + 50*i)
		}
		var b bytes.Buffer
		if err := dataset.EncodeRGBPNG(&b, 64, 32, rgb); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(frames, fmt.Sprintf("%03d.png", i)), b.Bytes(), 0o644)
	}
	testmodels.Write(t, dir)
	cfg = filepath.Join(dir, "run.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(startupConfig, brokerAddr, httpAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, cfg
}

// runProcess runs the test binary as `didoedge ARGS...` (see
// TestHelperProcessRuntime) and returns its exit code and stderr.
func runProcess(t *testing.T, timeout time.Duration, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcessRuntime$")
	cmd.Env = append(os.Environ(), "DIDOEDGE_HELPER_ARGS="+strings.Join(args, "\x1f"))
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("didoedge %v still running after %v:\n%s", args, timeout, stderr.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stderr.String()
}

func heldPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

func flipFirst(t *testing.T, path string, what []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, what)
	if i < 0 {
		t.Fatalf("%q not in %s", what, path)
	}
	data[i] ^= 0x01
	os.WriteFile(path, data, 0o644)
}

// TestStartupErrors: every start-up failure of issue 16 (each of which
// used to end in a nil-pointer panic that hid the real error) ends with
// exit code 1 and its own message naming the file or the key, and the
// failures that do not need the models come before they load.
func TestStartupErrors(t *testing.T) {
	tests := []struct {
		name string
		// setup damages the directory; it returns the command line.
		setup       func(t *testing.T) []string
		want        []string
		beforeModel bool // fails before "models loaded"
	}{
		{"truncated model", func(t *testing.T) []string {
			dir, cfg := startupDir(t, "127.0.0.1:0", "127.0.0.1:0")
			p := filepath.Join(dir, "depth.onnx")
			data, _ := os.ReadFile(p)
			os.WriteFile(p, data[:len(data)/2], 0o644)
			return []string{"run", "--config", cfg}
		}, []string{"depth model", "depth.onnx", "not a loadable ONNX model"}, false},
		{"bit-flipped model", func(t *testing.T) []string {
			dir, cfg := startupDir(t, "127.0.0.1:0", "127.0.0.1:0")
			flipFirst(t, filepath.Join(dir, "depth.onnx"), []byte("image"))
			return []string{"run", "--config", cfg}
		}, []string{"depth model", "depth.onnx", "not a loadable ONNX model", "hmage"}, false},
		{"swapped models", func(t *testing.T) []string {
			dir, cfg := startupDir(t, "127.0.0.1:0", "127.0.0.1:0")
			d, a := filepath.Join(dir, "depth.onnx"), filepath.Join(dir, "auxue.onnx")
			dd, _ := os.ReadFile(d)
			ad, _ := os.ReadFile(a)
			os.WriteFile(d, ad, 0o644)
			os.WriteFile(a, dd, 0o644)
			return []string{"run", "--config", cfg}
		}, []string{"depth model", "depth.onnx", "does not match its io spec"}, false},
		{"second instance on the outbox", func(t *testing.T) []string {
			dir, cfg := startupDir(t, "127.0.0.1:0", "127.0.0.1:0")
			box, err := outbox.Open(outbox.Options{Dir: filepath.Join(dir, "outbox"), MaxBytes: 1 << 20, MaxRecords: 100, SegmentBytes: 1 << 16})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { box.Close() })
			return []string{"run", "--config", cfg}
		}, []string{"alerts: outbox.dir", "locked by another process"}, true},
		{"embedded broker port in use", func(t *testing.T) []string {
			addr := heldPort(t)
			_, cfg := startupDir(t, addr, "127.0.0.1:0")
			return []string{"run", "--config", cfg}
		}, []string{"embedded.listen", "address already in use"}, true},
		{"http port in use", func(t *testing.T) []string {
			addr := heldPort(t)
			_, cfg := startupDir(t, "127.0.0.1:0", addr)
			return []string{"run", "--config", cfg}
		}, []string{"http.listen 127.0.0.1:", "address already in use"}, true},
		{"bad http.listen", func(t *testing.T) []string {
			_, cfg := startupDir(t, "127.0.0.1:0", "localhost")
			return []string{"run", "--config", cfg}
		}, []string{"run.yaml", "http.listen", `"localhost" is not host:port`}, true},
		{"demo with a damaged model", func(t *testing.T) []string {
			models := t.TempDir()
			f := testmodels.WriteReference(t, models)
			data, _ := os.ReadFile(f.AuxUE)
			data[len(data)-10] ^= 0x40 // a weight: ONNX Runtime would load it
			os.WriteFile(f.AuxUE, data, 0o644)
			return []string{"demo", "--models", models, "--duration", "3s", "--http", "off", "--broker", "127.0.0.1:0", "--calibrate-frames", "0"}
		}, []string{"auxue.onnx has sha256", "MANIFEST records", "internal/testmodels.WriteReference"}, true},
		{"demo with swapped models", func(t *testing.T) []string {
			models := t.TempDir()
			f := testmodels.WriteReference(t, models)
			dd, _ := os.ReadFile(f.Depth)
			ad, _ := os.ReadFile(f.AuxUE)
			os.WriteFile(f.Depth, ad, 0o644)
			os.WriteFile(f.AuxUE, dd, 0o644)
			return []string{"demo", "--models", models, "--duration", "3s", "--http", "off", "--broker", "127.0.0.1:0", "--calibrate-frames", "0"}
		}, []string{"depth.onnx has sha256", "MANIFEST records"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.setup(t)
			code, out := runProcess(t, 60*time.Second, args...)
			if code != 1 {
				t.Fatalf("exit code %d, want 1:\n%s", code, out)
			}
			for _, bad := range []string{"panic", "nil pointer", "goroutine "} {
				if strings.Contains(out, bad) {
					t.Fatalf("output contains %q:\n%s", bad, out)
				}
			}
			last := out[strings.LastIndex(strings.TrimRight(out, "\n"), "\ndidoedge ")+1:]
			for _, w := range tc.want {
				if !strings.Contains(last, w) {
					t.Fatalf("error message lacks %q:\n%s", w, out)
				}
			}
			if tc.beforeModel && strings.Contains(out, "models loaded") {
				t.Fatalf("failed only after loading the models:\n%s", out)
			}
			t.Logf("%s", strings.TrimSpace(last))
		})
	}
}
