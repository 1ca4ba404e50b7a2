package live

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/service/control"
	"github.com/didoedge/didoedge/runtime/stream"
)

// rig is a running pipeline (test models, 32x64 maps) fed by synthetic
// cameras, with the live server attached.
type rig struct {
	dir, path string
	cfg       *runconfig.Config
	p         *stream.Pipeline
	srv       *Server
	ctl       *control.Control
	logs      *syncBuffer // the control's log, JSON lines
	frames    chan string // camera of each assessed frame (OnFrame)
	boxes     []*camera.Mailbox
	stop      func()
}

// twoCameras is a two-camera config; front alarms (every pixel OOD),
// left is quiet; profiles night (front: one zone, tau_e 0.5) and wide.
const twoCameras = `cameras:
  - {name: front, url: "rtsp://127.0.0.1:1/unused", calibration: alarm.yaml}
  - {name: left, url: "rtsp://127.0.0.1:1/unused", grid: {rows: 1, cols: 3}}
` + testmodels.RuntimeConfig + `alerts:
  vehicle: v
  calibration: quiet.yaml
  grid: {rows: 1, cols: 2}
  events: {enter_inertia: 0s, exit_inertia: 0s, min_episode: 0s, merge_window: 0s}
  mqtt: {broker: embedded, client_id: c}
  outbox: {dir: outbox}
  embedded: {listen: "127.0.0.1:0", allow_anonymous: true}
http: {listen: "off"}
live: {listen: "127.0.0.1:0"}
profiles:
  night:
    events: {exit_inertia: 2s}
    cameras:
      front:
        zones: [{name: road, polygon: [[0, 0.5], [1, 0.5], [1, 1], [0, 1]]}]
        thresholds: {tau_e: 0.5}
`

// startRig builds a rig and runs it, with one synthetic camera per
// configured camera (fps each).
func startRig(t testing.TB, cfgText string, fps float64) *rig {
	t.Helper()
	return startRigWith(t, cfgText, fps, nil)
}

// startRigWith is startRig with edit applied to the loaded configuration
// before the pipeline is built (nil: none).
func startRigWith(t testing.TB, cfgText string, fps float64, edit func(*runconfig.Config)) *rig {
	t.Helper()
	r := buildRigWith(t, cfgText, edit)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.p.Run(ctx) }()
	for _, mb := range r.boxes {
		go publishFrames(ctx, mb, fps)
	}
	r.stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("pipeline did not stop within 20 s")
		}
	}
	t.Cleanup(r.stop)
	return r
}

// buildRig writes the test models and cfgText, starts the live server
// and builds the pipeline (not running: Process drives it, or startRig).
func buildRig(t testing.TB, cfgText string) *rig {
	t.Helper()
	return buildRigWith(t, cfgText, nil)
}

// buildRigWith is buildRig with edit applied to the loaded configuration
// (nil: none).
func buildRigWith(t testing.TB, cfgText string, edit func(*runconfig.Config)) *rig {
	t.Helper()
	dir := t.TempDir()
	testmodels.Write(t, dir)
	for name, text := range map[string]string{"quiet.yaml": testmodels.QuietCalibration, "alarm.yaml": testmodels.AlarmCalibration} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "rt.yaml")
	if err := os.WriteFile(path, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := runconfig.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := Listen(ctx, cfg.Live, Options{Domain: stream.MonitorsDomain(cfg)})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	specs, _ := cfg.CameraSpecs()
	var srcs []camera.Source
	var boxes []*camera.Mailbox
	for range specs {
		mb := camera.NewMailbox()
		srcs, boxes = append(srcs, mb), append(boxes, mb)
	}
	r := &rig{dir: dir, path: path, cfg: cfg, srv: srv, frames: make(chan string, 4096), boxes: boxes}
	r.p, err = stream.New(ctx, cfg, stream.Options{Sources: srcs, Tap: srv, OnFrame: func(ft stream.FrameTiming) {
		select {
		case r.frames <- ft.Camera:
		default:
		}
	}})
	if err != nil {
		cancel()
		srv.Close()
		t.Fatal(err)
	}
	r.logs = &syncBuffer{}
	r.ctl = control.NewControl(r.p, cfg, cfg.Live.ControlEnabled(), slog.New(slog.NewJSONHandler(r.logs, nil)))
	srv.Attach(r.p.Cameras(), r.ctl)
	srv.RegisterMetrics(r.p.Metrics())
	t.Cleanup(func() {
		cancel()
		r.p.Close() // after Run returned it did already; Close is idempotent
		srv.Close()
	})
	return r
}

// testFrame is a 64x32 frame (the test models' size).
func testFrame() *camera.Frame {
	f := &camera.Frame{Width: 64, Height: 32, RGB: make([]uint8, 3*64*32), Seq: 1, Capture: time.Now()}
	for i := range f.RGB {
		f.RGB[i] = uint8(i * 7)
	}
	return f
}

// publishFrames is a camera at fps: 64x32 frames whose pixels change.
func publishFrames(ctx context.Context, mb *camera.Mailbox, fps float64) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / fps))
	defer tick.Stop()
	f := camera.Frame{Width: 64, Height: 32, RGB: make([]uint8, 3*64*32)}
	for seq := uint64(1); ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if cap(f.RGB) < 3*64*32 { // Publish swaps buffers: ours may come back empty
			f.RGB = make([]uint8, 3*64*32)
		}
		f.RGB = f.RGB[:3*64*32]
		for i := range f.RGB {
			f.RGB[i] = uint8(i*7 + int(seq)*3)
		}
		f.Seq, f.Capture = seq, time.Now()
		mb.Publish(&f)
	}
}

// report is what live.cjs prints.
type report struct {
	ServerInfo struct {
		Name         string            `json:"name"`
		Capabilities []string          `json:"capabilities"`
		Metadata     map[string]string `json:"metadata"`
	} `json:"serverInfo"`
	Channels map[string]struct {
		ID             uint32 `json:"id"`
		Encoding       string `json:"encoding"`
		SchemaName     string `json:"schemaName"`
		SchemaEncoding string `json:"schemaEncoding"`
	} `json:"channels"`
	Counts       map[string]int            `json:"counts"`
	Decoded      map[string]map[string]any `json:"decoded"`
	JSONChecks   map[string]string         `json:"jsonChecks"`
	SchemaChecks map[string]string         `json:"schemaChecks"`
	LatencyMS    map[string]struct {
		N             int
		P50, P95, Max float64
	} `json:"latencyMs"`
	Statuses []struct {
		Level   int    `json:"level"`
		Message string `json:"message"`
	} `json:"statuses"`
	Parameters []control.Parameter `json:"parameters"`
	SetReply   []control.Parameter `json:"setReply"`
	Errors     []string            `json:"errors"`
	Closed     *struct {
		Code   int    `json:"code"`
		Reason string `json:"reason"`
	} `json:"closed"`
}

// nodeDir is testdata/node beside this file.
func nodeDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", "node")
}

// foxglove runs Foxglove's client (live.cjs) against url with args. A
// missing Node or missing packages fail the test: they are real peers,
// installed by scripts/deps.sh.
func foxglove(t testing.TB, url string, args ...string) report {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found (scripts/deps.sh): %v", err)
	}
	dir := nodeDir()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@foxglove", "ws-protocol", "package.json")); err != nil {
		t.Fatalf("@foxglove/ws-protocol is not installed in %s (run bash scripts/deps.sh): %v", dir, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"live.cjs", url}, args...)...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	runErr := cmd.Run()
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("live.cjs: %v; output %q; stderr %q", errors.Join(runErr, err), out.String(), errb.String())
	}
	if runErr != nil {
		t.Fatalf("live.cjs: %v; stderr %q", runErr, errb.String())
	}
	return rep
}
