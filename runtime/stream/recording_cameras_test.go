package stream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/testmodels"

	"github.com/didoedge/didoedge/internal/mcapcheck"
	"github.com/didoedge/didoedge/runtime/record"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// TestRecordCamerasCalibrations records two cameras whose calibration
// files differ (front: alarm.yaml, left: quiet.yaml), then reloads left
// onto alarm.yaml: read back with Foxglove's reader, every didoedge.models
// record names each camera's own file with its sha256 (and no file-wide
// calibration), the record after the reload names left's new file, and a
// replay of either camera is compared with that camera's file.
func TestRecordCamerasCalibrations(t *testing.T) {
	s := newTestSetup(t, "quiet.yaml", testmodels.ConfigZones)
	cameras := func(left string) string {
		return `  - {name: front, url: "rtsp://127.0.0.1:1/front", calibration: alarm.yaml}
  - {name: left, url: "rtsp://127.0.0.1:1/left", calibration: ` + left + `}
`
	}
	write := func(left string) string {
		path := multiConfig(t, s.dir, cameras(left), "quiet.yaml", testmodels.ConfigZones)
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString("record: {mode: continuous, dir: rec, frame_format: png, maps: [epistemic], queue: 64}\n"); err != nil {
			t.Fatal(err)
		}
		return path
	}
	path := write("quiet.yaml")
	p, _, stop := startCameras(t, path, 20, nil)
	frames := func(i int) uint64 { return p.Metrics().Camera(i).Frames.Load() }
	waitFor(t, 30*time.Second, "10 frames of each camera", func() bool { return frames(0) >= 10 && frames(1) >= 10 })
	write("alarm.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	n := frames(1)
	waitFor(t, 30*time.Second, "10 frames of left after the reload", func() bool { return frames(1) >= n+10 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(s.dir, "rec", "rec-*.mcap"))
	if len(files) != 1 {
		t.Fatalf("recordings %v, want one", files)
	}

	sha := func(name string) string {
		b, err := os.ReadFile(filepath.Join(s.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		return hex.EncodeToString(h[:])
	}
	alarm, quiet := sha("alarm.yaml"), sha("quiet.yaml")
	if alarm == quiet {
		t.Fatal("the two calibration files are identical")
	}
	rep := mcapcheck.Check(t, files[0])
	if rep.Counts["/front/image"] == 0 || rep.Counts["/left/image"] == 0 {
		t.Fatalf("counts %v: want frames of both cameras", rep.Counts)
	}
	var left []string
	for _, md := range rep.Metadata {
		if md.Name != "didoedge.models" {
			continue
		}
		m := md.Metadata
		if m["cameras"] != "front,left" || m["camera.front.calibration_sha256"] != alarm ||
			m["camera.front.calibration_path"] != filepath.Join(s.dir, "alarm.yaml") || m["depth_sha256"] == "" {
			t.Fatalf("didoedge.models %v: want cameras front,left and front's alarm.yaml (sha256 %s)", m, alarm)
		}
		if _, ok := m["calibration_sha256"]; ok {
			t.Fatalf("didoedge.models %v names one file-wide calibration for two cameras", m)
		}
		switch m["camera.left.calibration_sha256"] {
		case quiet:
			left = append(left, "quiet")
		case alarm:
			left = append(left, "alarm")
		default:
			t.Fatalf("didoedge.models %v: left's calibration is neither file", m)
		}
	}
	if strings.Join(left, ",") != "quiet,alarm" {
		t.Fatalf("left's calibration in the didoedge.models records: %v, want quiet then alarm (the reload)", left)
	}

	cfg, err := runconfig.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		camera, calibration string
		same                bool
	}{
		{"front", "alarm.yaml", true},
		{"left", "alarm.yaml", true}, // the last record: after the reload
		{"left", "quiet.yaml", false},
		{"front", "quiet.yaml", false},
	} {
		rec, err := record.ReadRecording(files[0], tc.camera)
		if err != nil {
			t.Fatal(err)
		}
		if !rec.ModelsChanged {
			t.Errorf("%s: the reload's record is not reported", tc.camera)
		}
		now, err := record.RunIdentity(cfg.Depth.Model, cfg.AuxUE.Model, []record.CameraFile{{Camera: tc.camera, Calibration: filepath.Join(s.dir, tc.calibration)}})
		if err != nil {
			t.Fatal(err)
		}
		ch := rec.ModelChanges(now)
		if tc.same && len(ch) != 0 || !tc.same && (len(ch) != 1 || !strings.HasPrefix(ch[0], "calibration: "+filepath.Join(s.dir, tc.calibration))) {
			t.Errorf("replay of %s with %s: changes %q, want the recorded files: %v", tc.camera, tc.calibration, ch, tc.same)
		}
	}
}
