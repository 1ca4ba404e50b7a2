package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/internal/mcapcheck"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/apps/replay"
)

// replayConfig runs the test models on an image sequence and records it
// losslessly; %s is the calibration file. With tau_e at the median of the
// test models' K/S on these frames, the two zones cross their thresholds
// every few frames (see runtime's TestReplayDeterminism).
const replayConfig = `camera:
  sequence: {dir: frames, fps: 0}
inference: {providers: [{name: cpu}], intra_op_threads: 1}
depth:
  model: depth.onnx
  io:
    input: {name: image, height: 32, width: 64, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}
    depth: {name: depth, meaning: metric_depth}
auxue:
  model: auxue.onnx
  io:
    input: {name: image, height: 32, width: 64, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}
    depth_input: {name: depth, units: metres}
    scale: {name: scale, units: metres}
    epistemic: {name: epistemic}
alerts:
  vehicle: replaycar
  camera: front
  calibration: %s
  grid: {rows: 1, cols: 2}
  events: {fusion_time_constant: 0s, enter_inertia: 0s, exit_inertia: 0s, min_episode: 0s, merge_window: 0s, camera_stall: 0s}
  mqtt: {broker: embedded, client_id: didoedge-replay-test, close_timeout: 2s}
  outbox: {dir: outbox}
  embedded: {listen: "127.0.0.1:0", allow_anonymous: true}
http: {listen: "off"}
record: {mode: continuous, dir: rec, frame_format: png, queue: 64, intrinsics: [60, 60, 32, 16]}
`

const replayFlicker = `version: 1
tau_e: 0.4939
tau_a: 1000
scale_correction: 1
coverage: 0.9
levels:
  ood_fraction: {warn: {enter: 0.42, exit: 0.41}, critical: {enter: 0.6, exit: 0.59}}
`

// writeReplayFrames writes n 64x32 PNG frames that change with their
// index into DIR/frames, the image sequence of replayConfig.
func writeReplayFrames(t *testing.T, dir string, n int) {
	t.Helper()
	frames := filepath.Join(dir, "frames")
	if err := os.MkdirAll(frames, 0o755); err != nil {
		t.Fatal(err)
	}
	rgb := make([]uint8, 64*32*3)
	for i := 1; i <= n; i++ {
		for j := range rgb {
			rgb[j] = uint8(j*7 + i*3)
		}
		var b bytes.Buffer
		if err := dataset.EncodeRGBPNG(&b, 64, 32, rgb); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(frames, fmt.Sprintf("%03d.png", i)), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReplayCommand: `didoedge run` records a drive, `didoedge replay
// --compare` with the same config reproduces its events (exit 0), and with
// another calibration reports the differences (exit 1).
func TestReplayCommand(t *testing.T) {
	dir := t.TempDir()
	writeReplayFrames(t, dir, 40)
	testmodels.Write(t, dir)
	for name, text := range map[string]string{
		"flicker.yaml": replayFlicker,
		"quiet.yaml":   strings.Replace(replayFlicker, "tau_e: 0.4939", "tau_e: 1", 1),
		"run.yaml":     fmt.Sprintf(replayConfig, "flicker.yaml"),
		"other.yaml":   fmt.Sprintf(replayConfig, "quiet.yaml"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env, so, se := modelTestEnv()
	if code := run(context.Background(), env, []string{"run", "--config", filepath.Join(dir, "run.yaml")}); code != 0 {
		t.Fatalf("run: exit %d: %s", code, se)
	}
	liveEvents := strings.Count(so.String(), "\n")
	files, _ := filepath.Glob(filepath.Join(dir, "rec", "rec-*.mcap"))
	if len(files) != 1 || liveEvents < 4 {
		t.Fatalf("recordings %v, %d live events:\n%s", files, liveEvents, so)
	}
	rep := mcapcheck.Check(t, files[0])
	if rep.Counts["/front/image"] != 40 || rep.Counts["/front/events"] != liveEvents {
		t.Fatalf("recording counts %v, want 40 frames and %d events", rep.Counts, liveEvents)
	}

	env, so, se = modelTestEnv()
	if code := run(context.Background(), env, []string{"replay", files[0], "--config", filepath.Join(dir, "run.yaml"), "--compare"}); code != 0 {
		t.Fatalf("replay --compare: exit %d: %s\n%s", code, se, so)
	}
	t.Logf("didoedge replay --compare:\n%s", so)
	for _, want := range []string{"camera front, 40 frames", "models and calibration: the recorded ones", "replayed 40 frames (assessed 40",
		fmt.Sprintf("replay matches the recording: %d events in 2 zones", liveEvents), "zone r0c0: episodes recorded"} {
		if !strings.Contains(so.String(), want) {
			t.Fatalf("replay output lacks %q:\n%s", want, so)
		}
	}
	// The maps were recorded in float16 on the models' grid from lossless
	// frames: the replay's, with the same models on one thread, differ
	// from them by float16's rounding at most.
	for _, stream := range []string{"depth", "laplace_scale", "epistemic"} {
		m := regexp.MustCompile(`maps ` + stream + `: 40 frames, recorded vs replayed at the frame's size: max relative difference (\S+),`).FindStringSubmatch(so.String())
		if m == nil {
			t.Fatalf("replay output lacks the %s maps comparison:\n%s", stream, so)
		}
		if d, err := strconv.ParseFloat(m[1], 64); err != nil || d > replay.Float16Bound*1.001 {
			t.Errorf("%s maps: max relative difference %s, float16 rounds to %g", stream, m[1], replay.Float16Bound)
		}
	}

	env, so, se = modelTestEnv()
	if code := run(context.Background(), env, []string{"replay", "--speed", "max", "--config", filepath.Join(dir, "other.yaml"), "--compare", "--quiet", files[0]}); code != 1 {
		t.Fatalf("replay with another calibration: exit %d, want 1: %s\n%s", code, se, so)
	}
	for _, want := range []string{"differs from the recording: calibration: " + filepath.Join(dir, "quiet.yaml"), "MISMATCH", "not raised by the replay",
		"replay differs from the recording:"} {
		if !strings.Contains(so.String()+se.String(), want) {
			t.Fatalf("replay output lacks %q:\n%s\n%s", want, so, se)
		}
	}

	// The loop of docs/recording.md: export the recorded frames (with the
	// recorded intrinsics) and calibrate on them without ground truth.
	kitti := filepath.Join(dir, "kitti")
	env, so, se = modelTestEnv()
	if code := run(context.Background(), env, []string{"record", "export", files[0], "--kitti", kitti}); code != 0 {
		t.Fatalf("record export: exit %d: %s", code, se)
	}
	if !strings.Contains(so.String(), "exported 40 frames (64x32)") || !strings.Contains(so.String(), "intrinsics fx 60 fy 60 cx 32 cy 16") {
		t.Fatalf("export output %q", so)
	}
	calOut := filepath.Join(dir, "recalibrated.yaml")
	env, so, se = modelTestEnv()
	if code := run(context.Background(), env, []string{"calibrate", "--data", kitti, "--config", filepath.Join(dir, "run.yaml"), "--out", calOut}); code != 0 {
		t.Fatalf("calibrate on the export: exit %d: %s\n%s", code, se, so)
	}
	if cal, err := alerts.LoadCalibration(calOut); err != nil || !(cal.TauE > 0) || cal.Meta["frames"] != "40" {
		t.Fatalf("calibration from the recording: %+v %v\n%s", cal, err, so)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay"}, "usage: didoedge replay FILE"},
		{[]string{"replay", files[0], "--speed", "fast"}, `--speed "fast"`},
		{[]string{"replay", filepath.Join(dir, "none.mcap")}, "none.mcap"},
		{[]string{"replay", files[0], "--camera", "rear"}, "no frames of camera rear"},
	} {
		env, _, se := modelTestEnv()
		if code := run(context.Background(), env, tc.args); code != 1 || !strings.Contains(se.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, se, tc.want)
		}
	}
}

// TestReplayCameraOfSeveral: `didoedge run` records two cameras whose
// calibration files differ (front: flicker.yaml, which raises events;
// left: quiet.yaml, which never does); `didoedge replay --camera` with the
// same two-camera config replays each camera with its own zones and
// calibration and matches the recording (the check compares left with
// left's file, not the first camera's); a config that gives left front's
// file is reported and its events mismatch.
func TestReplayCameraOfSeveral(t *testing.T) {
	dir := t.TempDir()
	writeReplayFrames(t, dir, 30)
	testmodels.Write(t, dir)
	twoCameras := func(left string) string {
		text := fmt.Sprintf(replayConfig, "quiet.yaml")
		text = strings.Replace(text, "camera:\n  sequence: {dir: frames, fps: 0}\n", `cameras:
  - {name: front, sequence: {dir: frames, fps: 0}, calibration: flicker.yaml}
  - {name: left, sequence: {dir: frames, fps: 0}, calibration: `+left+`}
`, 1)
		return strings.Replace(text, "  camera: front\n", "", 1)
	}
	for name, text := range map[string]string{
		"flicker.yaml": replayFlicker,
		"quiet.yaml":   strings.Replace(replayFlicker, "tau_e: 0.4939", "tau_e: 1", 1),
		"two.yaml":     twoCameras("quiet.yaml"),
		"swapped.yaml": twoCameras("flicker.yaml"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env, so, se := modelTestEnv()
	if code := run(context.Background(), env, []string{"run", "--config", filepath.Join(dir, "two.yaml")}); code != 0 {
		t.Fatalf("run: exit %d: %s", code, se)
	}
	liveFront := strings.Count(so.String(), "camera=front")
	files, _ := filepath.Glob(filepath.Join(dir, "rec", "rec-*.mcap"))
	if len(files) != 1 || liveFront < 4 || strings.Contains(so.String(), "camera=left") {
		t.Fatalf("recordings %v, %d events of front (want >= 4, none of left):\n%s", files, liveFront, so)
	}
	rep := mcapcheck.Check(t, files[0])
	if rep.Counts["/front/image"] != 30 || rep.Counts["/left/image"] != 30 || rep.Counts["/front/events"] != liveFront {
		t.Fatalf("recording counts %v, want 30 frames of each camera and %d events of front", rep.Counts, liveFront)
	}

	for _, tc := range []struct {
		camera, config string
		code           int
		want           []string
	}{
		{"left", "two.yaml", 0, []string{"camera left, 30 frames", "models and calibration: the recorded ones", "replay matches the recording: 0 events"}},
		{"front", "two.yaml", 0, []string{"camera front, 30 frames", "models and calibration: the recorded ones",
			fmt.Sprintf("replay matches the recording: %d events in 2 zones", liveFront)}},
		{"left", "swapped.yaml", 1, []string{"differs from the recording: calibration: " + filepath.Join(dir, "flicker.yaml"), "MISMATCH", "raised only by the replay"}},
	} {
		env, so, se := modelTestEnv()
		code := run(context.Background(), env, []string{"replay", files[0], "--camera", tc.camera, "--config", filepath.Join(dir, tc.config), "--compare", "--quiet"})
		if code != tc.code {
			t.Fatalf("replay --camera %s --config %s: exit %d, want %d: %s\n%s", tc.camera, tc.config, code, tc.code, se, so)
		}
		for _, want := range tc.want {
			if !strings.Contains(so.String(), want) {
				t.Fatalf("replay --camera %s --config %s: output lacks %q:\n%s", tc.camera, tc.config, want, so)
			}
		}
	}
	// A config without the recorded camera names the cameras it has.
	os.WriteFile(filepath.Join(dir, "other.yaml"), []byte(strings.Replace(twoCameras("quiet.yaml"), "name: left", "name: rear", 1)), 0o644)
	env, _, se = modelTestEnv()
	if code := run(context.Background(), env, []string{"replay", files[0], "--camera", "left", "--config", filepath.Join(dir, "other.yaml")}); code != 1 ||
		!strings.Contains(se.String(), `no camera "left" (cameras: front, rear)`) {
		t.Fatalf("replay of a camera the config lacks: exit %d, stderr %s", code, se)
	}
}
