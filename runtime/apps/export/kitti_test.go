package export_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/calib/calibrate"
	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/internal/mcapcheck"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/apps/export"
	"github.com/didoedge/didoedge/runtime/record"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

const expW, expH = 64, 32

// recordSim records n simulated outdoor frames losslessly (PNG) with
// intrinsics and returns the file and the frames.
func recordSim(t *testing.T, n int) (string, [][]uint8) {
	t.Helper()
	dir := t.TempDir()
	rec, err := record.New(record.Config{Mode: record.ModeContinuous, Dir: dir, FrameFormat: "png", Queue: 64}, record.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := sim.NewRenderer(sim.Config{World: sim.WorldOutdoor, Width: expW, Height: expH, Seed: 5, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	fx, fy, cx, cy := r.Intrinsics()
	if err := rec.SetCamera("front", record.Intrinsics{Width: expW, Height: expH, Fx: fx, Fy: fy, Cx: cx, Cy: cy}); err != nil {
		t.Fatal(err)
	}
	sf := sim.NewFrame(expW, expH)
	t0 := time.Unix(1_800_000_000, 0)
	var frames [][]uint8
	for k := 1; k <= n; k++ {
		if err := r.Render(k, sf); err != nil {
			t.Fatal(err)
		}
		frames = append(frames, bytes.Clone(sf.RGB))
		if !rec.Frame(&record.Frame{Camera: "front", Seq: uint64(100 + k), Capture: t0.Add(time.Duration(k) * 66 * time.Millisecond),
			Width: expW, Height: expH, RGB: sf.RGB, MapWidth: expW, MapHeight: expH, Depth: sf.Depth}) {
			t.Fatalf("frame %d dropped", k)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.mcap"))
	if len(files) != 1 {
		t.Fatalf("files %v", files)
	}
	mcapcheck.Check(t, files[0])
	return files[0], frames
}

// TestExportKITTI exports a recording: dataset reads back exactly
// the recorded frames, in order, with the recorded intrinsics and no
// ground truth; every other frame with Every 2.
func TestExportKITTI(t *testing.T) {
	path, frames := recordSim(t, 6)
	out := filepath.Join(t.TempDir(), "kitti")
	res, err := export.KITTI(context.Background(), path, export.Options{Dir: out, Drive: "drive_a"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Frames != 6 || res.Width != expW || res.Height != expH || res.Truncated {
		t.Fatalf("result %+v", res)
	}
	ds, err := dataset.OpenSim(out)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Meta.HasGroundTruth() || ds.Meta.Intrinsics.Fx != res.Intrinsics.Fx || ds.Meta.Counts["val"] != 6 {
		t.Fatalf("meta %+v", ds.Meta)
	}
	items, err := ds.Split("val")
	if err != nil || len(items) != 6 {
		t.Fatalf("val split: %v %v", items, err)
	}
	for i, it := range items {
		s, err := ds.Load(it)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(s.RGB, frames[i]) || s.Sparse != nil {
			t.Fatalf("frame %d differs from the recorded one", i)
		}
	}
	idx, _ := os.ReadFile(filepath.Join(out, "drive_a", export.FramesFile))
	if lines := strings.Split(strings.TrimSpace(string(idx)), "\n"); len(lines) != 7 || !strings.HasPrefix(lines[1], "0 101 ") || !strings.HasPrefix(lines[6], "5 106 ") {
		t.Fatalf("frames.txt:\n%s", idx)
	}
	if _, err := export.KITTI(context.Background(), path, export.Options{Dir: out}); err == nil {
		t.Fatal("export over an existing data set accepted")
	}
	half := filepath.Join(t.TempDir(), "half")
	if res, err := export.KITTI(context.Background(), path, export.Options{Dir: half, Every: 2}); err != nil || res.Frames != 3 {
		t.Fatalf("every 2: %+v %v", res, err)
	}
	ds2, _ := dataset.OpenSim(half)
	items, _ = ds2.Split("val")
	if s, err := ds2.Load(items[1]); err != nil || !bytes.Equal(s.RGB, frames[2]) {
		t.Fatalf("every 2: second frame is not the third recorded one (%v)", err)
	}
}

// TestCalibrateOnExport runs calibrate on an exported recording with the
// seeded test models: it sets tau_e and tau_a and reports that the scale
// correction needs ground truth.
func TestCalibrateOnExport(t *testing.T) {
	path, _ := recordSim(t, 4)
	out := filepath.Join(t.TempDir(), "kitti")
	if _, err := export.KITTI(context.Background(), path, export.Options{Dir: out}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	testmodels.Write(t, dir)
	text := fmt.Sprintf(`camera: {url: "rtsp://127.0.0.1:1/unused"}
inference: {providers: [{name: cpu}], intra_op_threads: 1}
depth:
  model: depth.onnx
  io: {input: {name: image, height: %[1]d, width: %[2]d}, depth: {name: depth, meaning: metric_depth}}
auxue:
  model: auxue.onnx
  io: {kind: auxue, input: {name: image, height: %[1]d, width: %[2]d}, depth_input: {name: depth, units: metres}, scale: {name: scale, units: metres}, epistemic: {name: epistemic}}
alerts:
  vehicle: v
  camera: front
  grid: {rows: 2, cols: 2}
  mqtt: {broker: embedded, client_id: c}
  outbox: {dir: outbox}
  embedded: {allow_anonymous: true}
http: {listen: "off"}
`, expH, expW)
	cfg, err := runconfig.Parse(filepath.Join(dir, "rt.yaml"), []byte(text), dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := calibrate.Run(context.Background(), calibrate.Options{Models: cfg.ModelsConfig(), Alerts: cfg.AlertsConfig.Config, Data: out, TargetFAR: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Calibration
	if res.Frames != 4 || !res.NoGroundTruth || !(c.TauE > 0 && c.TauE <= 1) || !(c.TauA > 0) || c.ScaleCorrection != 1 || len(c.TauEZones) != 4 {
		t.Fatalf("result %+v", res)
	}
}
