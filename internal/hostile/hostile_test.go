package hostile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/capped"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/service/control"
)

// secretLine is the first line of a file that must never come back in an
// error or a response: the shape of /etc/shadow's first line (YAML reads
// it as a key, from its trailing colon).
const secretLine = "root:$y$j9T$Zq8sEcReT0kEn$abc:19700:0:99999:7:::"

// leaks are the parts of secretLine any of which in an error is a leak.
var leaks = []string{"root", "$y$", "Zq8sEcReT0kEn", "19700"}

// probeDeadline is the goal: no probe (a config load, a control request)
// takes longer.
const probeDeadline = 5 * time.Second

// within runs fn and fails t when it does not return by probeDeadline.
func within[T any](t *testing.T, what string, fn func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- fn() }()
	select {
	case v := <-done:
		return v
	case <-time.After(probeDeadline):
		t.Fatalf("%s: no answer after %v", what, probeDeadline)
		panic("unreachable")
	}
}

// configDir writes what the test configuration names: the two model files
// (their content is never read by Load: only checked to be files), the
// quiet calibration, a secret-looking file and a FIFO.
func configDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{"depth.onnx": "x", "auxue.onnx": "x", "quiet.yaml": testmodels.QuietCalibration,
		"secret": secretLine + "\ndaemon:*:19700:0:99999:7:::\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func baseConfig() string {
	return fmt.Sprintf(testmodels.ConfigYAML, "  url: rtsp://127.0.0.1:8554/sim", "quiet.yaml", testmodels.ConfigZones)
}

// A file key edit of the base configuration.
type fileKey struct {
	key  string // what the error must name
	edit func(doc, path string) string
}

func replace(old, new string) func(doc, path string) string {
	return func(doc, path string) string {
		if !strings.Contains(doc, old) {
			panic("config template changed: no " + old)
		}
		return strings.Replace(doc, old, fmt.Sprintf(new, path), 1)
	}
}

var depthIO = `  io:
    input: {name: image, height: 32, width: 64, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}
    depth: {name: depth, meaning: metric_depth}
    features: [{name: features}]
`

var auxIO = `  io:
    input: {name: image, height: 32, width: 64, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}
    depth_input: {name: depth, units: metres}
    scale: {name: scale, units: metres}
    epistemic: {name: epistemic}
`

// fileKeys are the keys of a runtime configuration that name a file read
// at load.
func fileKeys() []fileKey {
	return []fileKey{
		{"alerts.calibration", replace("calibration: quiet.yaml", "calibration: %q")},
		{"depth.model", replace("model: depth.onnx", "model: %q")},
		{"auxue.model", replace("model: auxue.onnx", "model: %q")},
		{"depth.io_spec", replace("  model: depth.onnx\n"+depthIO, "  model: depth.onnx\n  io_spec: %q\n")},
		{"depth.description", replace("  model: depth.onnx\n"+depthIO, "  model: depth.onnx\n  description: %q\n")},
		{"auxue.io_spec", replace("  model: auxue.onnx\n"+auxIO, "  model: auxue.onnx\n  io_spec: %q\n")},
		{"auxue.description", replace("  model: auxue.onnx\n"+auxIO, "  model: auxue.onnx\n  description: %q\n")},
		{"camera.intrinsics_file", replace("  url: rtsp://127.0.0.1:8554/sim\n", "  url: rtsp://127.0.0.1:8554/sim\n  intrinsics_file: %q\n")},
		{"live.token_file", func(doc, path string) string {
			return doc + fmt.Sprintf("live:\n  listen: 127.0.0.1:0\n  token_file: %q\n", path)
		}},
		{"alerts.mqtt.password_file", replace("client_id: didoedge-test,", "client_id: didoedge-test, username: u, password_file: %q,")},
	}
}

// TestFileKeysRefuseDevices: every file key of a configuration naming
// /dev/zero or a FIFO, and the configuration file itself being one, is
// refused at load with an error naming the key and the path, in bounded
// memory and time (it was read whole: the process grew until the kernel
// killed it, and a FIFO blocked for ever). Each probe runs in a capped
// child.
func TestFileKeysRefuseDevices(t *testing.T) {
	for _, target := range []string{"/dev/zero", "fifo"} {
		for _, fk := range fileKeys() {
			t.Run(fk.key+"="+filepath.Base(target), func(t *testing.T) {
				if !capped.Child(t, capped.Default()) {
					return
				}
				dir := configDir(t)
				path := target
				if !filepath.IsAbs(path) {
					path = filepath.Join(dir, path)
				}
				cfgPath := filepath.Join(dir, "vehicle.yaml")
				if err := os.WriteFile(cfgPath, []byte(fk.edit(baseConfig(), path)), 0o600); err != nil {
					t.Fatal(err)
				}
				err := within(t, "load", func() error { _, err := runconfig.Load(cfgPath); return err })
				if err == nil || !strings.Contains(err.Error(), fk.key) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a regular file") {
					t.Fatalf("load with %s = %s: %v; want an error naming the key, the path and 'not a regular file'", fk.key, path, err)
				}
			})
		}
		t.Run("the config file="+filepath.Base(target), func(t *testing.T) {
			if !capped.Child(t, capped.Default()) {
				return
			}
			path := target
			if !filepath.IsAbs(path) {
				path = filepath.Join(configDir(t), path)
			}
			err := within(t, "load", func() error { _, err := runconfig.Load(path); return err })
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a regular file") {
				t.Fatalf("Load(%s): %v", path, err)
			}
		})
	}
	// The probes' own check: the base configuration loads.
	dir := configDir(t)
	cfgPath := filepath.Join(dir, "vehicle.yaml")
	os.WriteFile(cfgPath, []byte(baseConfig()), 0o600)
	if _, err := runconfig.Load(cfgPath); err != nil {
		t.Fatalf("the base configuration does not load: %v", err)
	}
}

// TestSecretNotEchoed: a configuration whose calibration key names a file
// holding a secret-looking line is refused with the key, the path and the
// line number, never the line (it answered root:*:...: unknown key).
func TestSecretNotEchoed(t *testing.T) {
	for _, fk := range fileKeys() {
		if strings.HasSuffix(fk.key, "model") || strings.HasSuffix(fk.key, "_file") {
			continue // not parsed (models are checked, token and password are the secrets' own keys)
		}
		t.Run(fk.key, func(t *testing.T) {
			dir := configDir(t)
			cfgPath := filepath.Join(dir, "vehicle.yaml")
			os.WriteFile(cfgPath, []byte(fk.edit(baseConfig(), filepath.Join(dir, "secret"))), 0o600)
			_, err := runconfig.Load(cfgPath)
			if err == nil || !strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "line 1") {
				t.Fatalf("load: %v; want the path and line 1", err)
			}
			for _, l := range leaks {
				if strings.Contains(err.Error(), l) {
					t.Fatalf("error %q quotes the file (%q)", err, l)
				}
			}
		})
	}
}

// aliasBomb is 9 levels of 9 aliases under key (4 KB, 9^9 nodes expanded).
func aliasBomb(key string) string {
	var b strings.Builder
	b.WriteString("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	fmt.Fprintf(&b, "%s: *a8\n", key)
	return b.String()
}

// TestAliasBombConfig: a configuration of under 4 KB whose
// alerts.events.inertia_frames (a free-form value) holds the alias bomb,
// 9 anchors each of 9 aliases of the one before, is refused by yaml.v3's
// aliasing guard in bounded memory and time; the strict walk before it
// expands nothing (internal/yamlstrict's TestAliasBomb shows the walk
// that followed every alias running out of 3 GB).
func TestAliasBombConfig(t *testing.T) {
	if !capped.Child(t, capped.Default()) {
		return
	}
	dir := configDir(t)
	var bomb strings.Builder
	bomb.WriteString("    inertia_frames:\n      - &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&bomb, "      - &a%d [", i)
		for j := 0; j < 9; j++ {
			if j > 0 {
				bomb.WriteString(", ")
			}
			fmt.Fprintf(&bomb, "*a%d", i-1)
		}
		bomb.WriteString("]\n")
	}
	old := "  events: {fusion_time_constant: 0s, exit_inertia: 0s, min_episode: 0s, merge_window: 0s, camera_stall: 0s}\n"
	cfg := baseConfig()
	if !strings.Contains(cfg, old) {
		t.Fatal("config template changed: no events line")
	}
	cfg = strings.Replace(cfg, old, "  events:\n    fusion_time_constant: 0s\n"+bomb.String(), 1)
	if len(cfg) > 4096 {
		t.Fatalf("config of %d bytes", len(cfg))
	}
	cfgPath := filepath.Join(dir, "vehicle.yaml")
	os.WriteFile(cfgPath, []byte(cfg), 0o600)
	err := within(t, "load", func() error { _, err := runconfig.Load(cfgPath); return err })
	if err == nil || !strings.Contains(err.Error(), "excessive aliasing") {
		t.Fatalf("load of the alias bomb: %v, want yaml's excessive aliasing", err)
	}
}

func indent(s, by string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i := range lines {
		lines[i] = by + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// refusingApplier records that it was asked: the probes' requests are
// all refused before the pipeline is, so any call is a failure.
type refusingApplier struct{ calls int }

func (a *refusingApplier) Apply(context.Context, *runconfig.Config) error {
	a.calls++
	return errors.New("the probe's request reached the pipeline")
}

// TestControlRequests: POST /api/cameras of the control API with a
// calibration (or intrinsics file, or sequence directory) at /dev/zero,
// at a FIFO, outside the allowed directories, or at a secret inside them,
// and with an alias bomb as its YAML body: each answered in bounded time
// and memory with a 4xx that names the key but never the file's content.
func TestControlRequests(t *testing.T) {
	if !capped.Child(t, capped.Default()) {
		return
	}
	dir := configDir(t)
	cfgPath := filepath.Join(dir, "vehicle.yaml")
	os.WriteFile(cfgPath, []byte(baseConfig()), 0o600)
	cfg, err := runconfig.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	app := &refusingApplier{}
	srv := httptest.NewServer(control.NewControl(app, cfg, true, nil))
	defer srv.Close()
	cases := []struct {
		name, body string
		status     int
		parts      []string
	}{
		{"calibration /dev/zero", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "calibration": "/dev/zero"}`, 403, []string{"calibration", "/dev/zero", "allowed_dirs"}},
		{"calibration /etc/shadow", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "calibration": "/etc/shadow"}`, 403, []string{"calibration", "/etc/shadow", "allowed_dirs"}},
		{"calibration a FIFO inside", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "calibration": "fifo"}`, 422, []string{"calibration", "not a regular file"}},
		{"calibration a secret inside", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "calibration": "secret"}`, 422, []string{"calibration", "secret", "line 1"}},
		{"intrinsics_file /dev/zero", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "intrinsics_file": "/dev/zero"}`, 403, []string{"intrinsics_file", "allowed_dirs"}},
		{"intrinsics_file a secret inside", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "intrinsics_file": "secret"}`, 422, []string{"intrinsics_file"}},
		{"sequence dir /", `{"name": "rear", "sequence": {"dir": "/"}}`, 403, []string{"sequence.dir", "allowed_dirs"}},
		{"alias bomb body", aliasBomb("url"), 400, []string{"camera"}},
	}
	for _, tc := range cases {
		resp := within(t, tc.name, func() *http.Response {
			r, err := http.Post(srv.URL+"/api/cameras", "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
				return nil
			}
			return r
		})
		if resp == nil {
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, body, tc.status)
			continue
		}
		for _, p := range tc.parts {
			if !strings.Contains(string(body), p) {
				t.Errorf("%s: answer %s does not name %q", tc.name, body, p)
			}
		}
		for _, l := range leaks {
			if strings.Contains(string(body), l) {
				t.Errorf("%s: answer %s quotes the file (%q)", tc.name, body, l)
			}
		}
	}
	if app.calls != 0 {
		t.Errorf("%d refused requests reached the pipeline", app.calls)
	}
}
