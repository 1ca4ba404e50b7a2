package record

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/didoedge/didoedge/runtime/record/upload"
)

// sameDevice reports whether two paths are on one filesystem.
func sameDevice(t *testing.T, a, b string) bool {
	t.Helper()
	var sa, sb syscall.Stat_t
	if err := syscall.Stat(a, &sa); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(b, &sb); err != nil {
		t.Fatal(err)
	}
	return sa.Dev == sb.Dev
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig("/etc/didoedge/run.yaml", []byte(`
record:
  mode: event
  dir: recordings
  pre_roll: 3s
  maps: [epistemic]
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Dir != filepath.Join("/etc/didoedge", "recordings") || c.PreRoll != 3*time.Second || c.PostRoll != DefaultPostRoll ||
		len(c.Maps) != 1 || c.JPEGQuality != DefaultJPEGQuality || c.BudgetBytes != DefaultBudgetBytes || c.Compression != "zstd" ||
		c.MapResolution != MapsComputed || c.MapPrecision != MapsFloat16 || c.MapMantissaBits != 0 {
		t.Fatalf("config %+v", c)
	}
	// record.upload: defaults, the queue's directory under dir unless
	// given, relative to the file like dir.
	for _, tc := range []struct{ yaml, dir string }{
		{"record: {mode: event, dir: rec, upload: {target: s3://fleet/drives}}", "/etc/didoedge/rec/upload"},
		{"record: {mode: event, dir: rec, upload: {target: s3://fleet/drives, dir: queue}}", "/etc/didoedge/queue"},
		{"record: {mode: event, dir: rec, upload: {target: s3://fleet/drives, dir: /var/q}}", "/var/q"},
	} {
		c, err := ParseConfig("/etc/didoedge/run.yaml", []byte(tc.yaml))
		if err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		if u := c.Upload; u == nil || u.Dir != tc.dir || u.Target != "s3://fleet/drives" || u.MaxBytes != 8<<30 || u.PartSize != 16<<20 {
			t.Errorf("%s: upload %+v, want dir %s and the defaults", tc.yaml, u, tc.dir)
		}
	}
	if c, err := ParseConfig("x.yaml", []byte("record: {mode: off}\n")); err != nil || c.Enabled() {
		t.Fatalf("off: %+v %v", c, err)
	}
	if c, err := ParseConfig("x.yaml", []byte("record: {mode: continuous, dir: /r, maps: []}\n")); err != nil || len(c.Maps) != 0 {
		t.Fatalf("no maps: %+v %v", c, err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"record: {mode: always}", "x.yaml: record.mode: \"always\""},
		{"record: {mode: event}", "record.dir: required"},
		{"record: {mode: event, dir: d, jpeg_quality: 101}", "record.jpeg_quality: 101"},
		{"record: {mode: event, dir: d, maps: [depth, sky]}", "record.maps[1]: \"sky\""},
		{"record: {mode: event, dir: d, maps: [depth, depth]}", "record.maps[1]: \"depth\" listed twice"},
		{"record: {mode: event, dir: d, budget_bytes: 1000000, rotate_bytes: 600000, chunk_bytes: 65536}", "record.budget_bytes"},
		{"record: {mode: event, dir: d, rotate_bytes: 100000}", "record.rotate_bytes"},
		{"record: {mode: event, dir: d, chunk_bytes: 100}", "record.chunk_bytes"},
		{"record: {mode: event, dir: d, queue: 0}", ""}, // 0 is the default
		{"record: {mode: event, dir: d, queue: 1000}", "record.queue"},
		{"record: {mode: event, dir: d, compression: gzip}", "record.compression"},
		{"record: {mode: event, dir: d, frame_format: webp}", "record.frame_format"},
		{"record: {mode: event, dir: d, pre_roll: -1s}", "record.pre_roll"},
		{"record: {mode: event, dir: d, map_mantissa_bits: 30}", "record.map_mantissa_bits"},
		{"record: {mode: event, dir: d, map_mantissa_bits: 10}", ""}, // float32 rounded: map_precision follows
		{"record: {mode: event, dir: d, map_precision: float16, map_mantissa_bits: 10}", "record.map_mantissa_bits: applies to map_precision float32"},
		{"record: {mode: event, dir: d, map_precision: bfloat16}", "record.map_precision: \"bfloat16\""},
		{"record: {mode: event, dir: d, map_resolution: native}", "record.map_resolution: \"native\" is not computed or frame"},
		{"record: {mode: event, dir: d, map_resolution: frame, map_precision: float32}", ""},
		{"record: {mode: event, dir: d, rotate_time: 10ms}", "record.rotate_time"},
		{"record: {mode: event, dir: d, ring_bytes: 10}", "record.ring_bytes"},
		{"record: {mode: event, dir: d, pre_rol: 1s}", "record.pre_rol: unknown key (line 1)"},
		{"record: {mode: event, dir: d, queue: many}", "record.queue"},
		{"record: {mode: event, dir: d, intrinsics: [500, 500, 320]}", "record.intrinsics: 3 values"},
		{"record: {mode: event, dir: d, intrinsics: [0, 500, 320, 96]}", "record.intrinsics: fx 0"},
		{"record: {mode: event, dir: d, intrinsics: [500, 500, .nan, 96]}", "record.intrinsics[2]: NaN"},
		{"record: {mode: event, dir: d, intrinsics: [500, 500, 320, 96]}", ""},
		{"record: {mode: event, dir: d, upload: {target: s3://fleet/drives}}", ""},
		{"record: {mode: event, dir: d, upload: {}}", "record.upload.target: "},
		{"record: {mode: event, dir: d, upload: {target: /mnt/fleet}}", "record.upload.target: "},
		{"record: {mode: event, dir: d, upload: {target: s3://fleet, max_bytes: -1}}", "record.upload.max_bytes: -1"},
		{"record: {mode: event, dir: d, upload: {target: s3://fleet, max_bytes: 100000000}}", "record.upload.max_bytes: 100000000 is below two files"},
		{"record: {mode: event, dir: d, upload: {target: s3://fleet, part_size: 1048576}}", "record.upload.part_size: 1048576"},
		{"record: {mode: event, dir: d, upload: {target: s3://fleet, rate_limit: -5}}", "record.upload.rate_limit: -5"},
		{"record: {mode: event, dir: d, budget_bytes: 200000000000, rotate_bytes: 60000000000, upload: {target: s3://fleet, max_bytes: 200000000000, part_size: 5242880}}",
			"record.upload.part_size: 5242880 bytes x S3's 10000 parts"},
		{"record: {mode: event, dir: d, upload: {target: s3://fleet, dir: d}}", "record.upload.dir: "},
		{"record: {mode: event, dir: d, upload: {target: s3://fleet, bucket: b}}", "record.upload.bucket: unknown key"},
		{"record: {mode: event, dir: d, upload: {target: s3://fleet, max_bytes: lots}}", "record.upload.max_bytes"},
	} {
		_, err := ParseConfig("x.yaml", []byte(tc.yaml))
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.yaml, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.yaml, err, tc.want)
		}
	}
}

// FuzzParseConfig: any document gives a config or an error, never a panic;
// an accepted config validates.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("record: {mode: event, dir: d, maps: [depth]}"))
	f.Add([]byte("record:\n  mode: continuous\n  dir: /x\n  budget_bytes: 99999999999\n"))
	f.Add([]byte("record: {mode: event, dir: d, upload: {target: s3://fleet/p, max_bytes: 1073741824, part_size: 5242880}}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig("f.yaml", b)
		if err == nil {
			if err := c.Validate("record"); err != nil {
				t.Fatalf("accepted config does not validate: %v", err)
			}
		}
	})
}

func TestNewRefusesBadOptions(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Mode: ModeContinuous, Dir: dir}
	for _, o := range []Options{
		{Streams: []JSONStream{{Name: "image", SchemaName: "x", Schema: []byte("{}")}}},
		{Streams: []JSONStream{{Name: "events", SchemaName: "x", Schema: []byte("{}")}, {Name: "events", SchemaName: "x", Schema: []byte("{}")}}},
		{Streams: []JSONStream{{Name: "events"}}},
	} {
		if _, err := New(cfg, o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
	if _, err := New(Config{Mode: ModeOff}, Options{}); err == nil {
		t.Error("mode off accepted by New")
	}
	// record.upload: the vehicle is a level of the object keys; the
	// queue must be on dir's filesystem (files are moved in by rename).
	up := cfg
	up.Upload = &upload.Config{Target: "s3://fleet/drives"}
	for _, o := range []Options{{}, {Vehicle: "a/b"}, {Vehicle: ".."}} {
		if _, err := New(up, o); err == nil || !strings.Contains(err.Error(), "record.upload: the vehicle") {
			t.Errorf("vehicle %q: %v", o.Vehicle, err)
		}
	}
	if shm, err := os.MkdirTemp("/dev/shm", "didoedge-queue-"); err == nil {
		defer os.RemoveAll(shm)
		if sameDevice(t, shm, dir) {
			t.Log("/dev/shm is on the test directory's filesystem: the cross-filesystem case is not checked")
		} else {
			other := cfg
			other.Upload = &upload.Config{Target: "s3://fleet/drives", Dir: shm}
			if _, err := New(other, Options{Vehicle: "van-07"}); err == nil || !strings.Contains(err.Error(), "record.upload.dir: "+shm+" must be on the filesystem of record.dir") {
				t.Errorf("a queue on another filesystem: %v", err)
			}
		}
	}
	rec, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeRec(t, rec)
	if rec.JSON("front", "events", time.Now(), []byte("{}")) || rec.Stats().MessagesDropped != 1 {
		t.Error("JSON on an undeclared stream accepted")
	}
	if err := rec.SetCamera("bad id", Intrinsics{Width: 1, Height: 1, Fx: 1, Fy: 1}); err == nil {
		t.Error("bad camera id accepted")
	}
	if err := rec.SetCamera("front", Intrinsics{Width: 1, Height: 1}); err == nil {
		t.Error("zero focal length accepted")
	}
}

// TestDropsWhenFull: with the worker stopped, Frame never blocks: the
// queue's slots fill, then frames are dropped and counted.
func TestDropsWhenFull(t *testing.T) {
	rec, err := New(Config{Mode: ModeContinuous, Dir: t.TempDir(), Queue: 3}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec.closed.Store(true)
	close(rec.stop)
	<-rec.done
	rec.closed.Store(false)
	s := newSynth("front", 8, 8, 4, 4)
	took := 0
	for k := 1; k <= 10; k++ {
		if rec.Frame(s.fill(k, time.Unix(1, 0), 15)) {
			took++
		}
	}
	st := rec.Stats()
	if took != 3 || st.FramesDropped != 7 || st.FramesSubmitted != 10 || st.QueueLength != 3 {
		t.Fatalf("took %d, stats %+v", took, st)
	}
}

func TestModelIdentity(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.onnx")
	if err := os.WriteFile(p, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	id, err := ModelIdentity(map[string]string{"depth": p, "auxue": ""})
	// sha256("abc"), FIPS 180-2 test vector.
	if err != nil || id["depth_sha256"] != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" || id["depth_path"] != p || len(id) != 2 {
		t.Fatalf("%v %v", id, err)
	}
	if _, err := ModelIdentity(map[string]string{"depth": filepath.Join(dir, "missing")}); err == nil || !strings.Contains(err.Error(), "depth") {
		t.Fatalf("missing file: %v", err)
	}
}

// TestRunIdentity: every camera names its own calibration file; one
// camera also gives the file-wide keys older readers read, several do
// not; CalibrationOf reads both forms.
func TestRunIdentity(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	// sha256 of "abc" and of "" (FIPS 180-2 and the empty-message vector).
	for name, text := range map[string]string{"depth.onnx": "abc", "front.yaml": "abc", "left.yaml": ""} {
		files[name] = filepath.Join(dir, name)
		if err := os.WriteFile(files[name], []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const abc, empty = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	two, err := RunIdentity(files["depth.onnx"], "", []CameraFile{{"front", files["front.yaml"]}, {"left", files["left.yaml"]}, {"rear", ""}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"depth_path": files["depth.onnx"], "depth_sha256": abc, "cameras": "front,left,rear",
		"camera.front.calibration_path": files["front.yaml"], "camera.front.calibration_sha256": abc,
		"camera.left.calibration_path": files["left.yaml"], "camera.left.calibration_sha256": empty}
	if !maps.Equal(two, want) {
		t.Fatalf("three cameras:\n got %v\nwant %v", two, want)
	}
	for cam, sha := range map[string]string{"front": abc, "left": empty, "rear": "", "other": ""} {
		if _, got := CalibrationOf(two, cam); got != sha {
			t.Errorf("CalibrationOf(%s) = %q, want %q", cam, got, sha)
		}
	}
	one, err := RunIdentity(files["depth.onnx"], "", []CameraFile{{"left", files["left.yaml"]}})
	if err != nil || one["calibration_sha256"] != empty || one["calibration_path"] != files["left.yaml"] || one["camera.left.calibration_sha256"] != empty || one["cameras"] != "left" {
		t.Fatalf("one camera: %v %v", one, err)
	}
	old := map[string]string{"calibration_path": files["front.yaml"], "calibration_sha256": abc}
	if p, sha := CalibrationOf(old, "front"); p != files["front.yaml"] || sha != abc {
		t.Fatalf("file from before per-camera calibrations: %s %s", p, sha)
	}
	if _, err := RunIdentity("", "", []CameraFile{{"left", filepath.Join(dir, "missing.yaml")}}); err == nil || !strings.Contains(err.Error(), "camera.left.calibration") {
		t.Fatalf("missing calibration: %v", err)
	}
}
