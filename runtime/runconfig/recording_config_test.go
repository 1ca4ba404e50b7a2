package runconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/internal/testmodels"

	"github.com/didoedge/didoedge/runtime/record"
)

// TestRecordConfig checks the record: section inside the runtime config:
// off by default, defaults filled, dir relative to the file, and every
// error naming the file and record.<key>.
func TestRecordConfig(t *testing.T) {
	dir := configDir(t)
	parse := func(section string) (*Config, error) {
		return Parse(filepath.Join(dir, "cfg.yaml"), []byte(validConfig()+section), dir)
	}
	cfg, err := parse("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Record.Enabled() || cfg.Record.Mode != record.ModeOff {
		t.Fatalf("recording must be off by default: %+v", cfg.Record)
	}
	cfg, err = parse("record: {mode: continuous, dir: rec, frame_format: png, intrinsics: [500, 500, 32, 16]}\n")
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Record
	if r.Dir != filepath.Join(dir, "rec") || r.JPEGQuality != record.DefaultJPEGQuality || r.Queue != record.DefaultQueue ||
		len(r.Maps) != 4 || r.FrameFormat != "png" || len(r.Intrinsics) != 4 { // depth, laplace_scale, epistemic, confidence
		t.Fatalf("record section: %+v", r)
	}
	for _, tc := range []struct {
		name, section string
		parts         []string
	}{
		{"mode", "record: {mode: always}\n", []string{"cfg.yaml", `record.mode: "always" is not off, continuous or event`}},
		{"dir", "record: {mode: event}\n", []string{"cfg.yaml", "record.dir: required when recording"}},
		{"unknown key", "record: {mode: event, dir: d, pre_rol: 1s}\n", []string{"cfg.yaml", "record.pre_rol: unknown key"}},
		{"jpeg quality", "record: {mode: event, dir: d, jpeg_quality: 101}\n", []string{"cfg.yaml", "record.jpeg_quality: 101 outside [1, 100]"}},
		{"maps", "record: {mode: continuous, dir: d, maps: [depth, sky]}\n", []string{`record.maps[1]: "sky" is not depth`}},
		{"budget", "record: {mode: continuous, dir: d, budget_bytes: 1000000, rotate_bytes: 600000, chunk_bytes: 65536}\n", []string{"record.budget_bytes"}},
		{"queue", "record: {mode: continuous, dir: d, queue: 1000}\n", []string{"record.queue: 1000 outside [1, 256]"}},
		{"post roll", "record: {mode: event, dir: d, post_roll: 11m}\n", []string{"record.post_roll"}},
		{"intrinsics", "record: {mode: event, dir: d, intrinsics: [1, 2]}\n", []string{"record.intrinsics: 2 values"}},
		{"compression", "record: {mode: event, dir: d, compression: gzip}\n", []string{"record.compression"}},
		// Other sections' errors are still reported beside the recorder's.
		{"joined", "record: {mode: event}\npipeline: {tick: 1ms}\n", []string{"record.dir", "pipeline.tick"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.section)
			testmodels.MustContain(t, err, tc.parts...)
		})
	}
}

// TestVehicleRecordExample keeps the commented record: example of
// configs/vehicle.yaml valid once uncommented.
func TestVehicleRecordExample(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "configs", "vehicle.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "# record:") || (len(block) > 0 && strings.HasPrefix(line, "#   ")) {
			block = append(block, strings.TrimPrefix(line, "# "))
		} else if len(block) > 0 {
			break
		}
	}
	if len(block) < 10 {
		t.Fatalf("no commented record: example in configs/vehicle.yaml (%d lines)", len(block))
	}
	c, err := record.ParseConfig("/etc/didoedge/vehicle.yaml", []byte(strings.Join(block, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode != record.ModeEvent || len(c.Intrinsics) != 4 || c.Dir != "/var/lib/didoedge/recordings" ||
		c.Upload == nil || c.Upload.Target != "s3://fleet-recordings/drives" || c.Upload.Dir != "/var/lib/didoedge/recordings/upload" {
		t.Fatalf("example parsed as %+v", c)
	}
}
