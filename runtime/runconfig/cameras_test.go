package runconfig

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestAddCamera: a camera added at run time is validated as a cameras
// item of the file (errors name cameras[i].<key>), its relative paths are
// the file's, a single camera configuration becomes a cameras list whose
// first camera keeps its source and zones, and a refused camera changes
// nothing.
func TestAddCamera(t *testing.T) {
	dir := configDir(t)
	for _, c := range []struct {
		name, entry string
		parts       []string
		is          error
	}{
		{"rtsp", `{"name": "rear", "url": "rtsp://127.0.0.1:8554/rear", "stall_timeout": "3s"}`, nil, nil},
		{"sequence relative to the file", `{"name": "rear", "sequence": {"dir": "frames", "fps": 10}, "calibration": "quiet.yaml"}`, nil, nil},
		{"own zones", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "zones": [{"name": "near", "polygon": [[0, 0.5], [1, 0.5], [1, 1]]}]}`, nil, nil},
		{"empty name", `{"url": "rtsp://127.0.0.1/r"}`, []string{"cameras[1].name: empty"}, nil},
		{"bad name", `{"name": "rear/x", "url": "rtsp://127.0.0.1/r"}`, []string{"cameras[1].name:"}, nil},
		{"name in use", `{"name": "front", "url": "rtsp://127.0.0.1/r"}`, []string{`cameras[1].name: "front" is also cameras[0].name`}, ErrCameraExists},
		{"no source", `{"name": "rear"}`, []string{"cameras[1]: give url (RTSP) or sequence"}, nil},
		{"bad url", `{"name": "rear", "url": "http://127.0.0.1/r"}`, []string{"cameras[1].url:", "must start with rtsp://"}, nil},
		{"missing sequence dir", `{"name": "rear", "sequence": {"dir": "nowhere"}}`, []string{"cameras[1].sequence.dir:", "no such file or directory"}, nil},
		{"negative duration", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "backoff_min": "-1s"}`, []string{"cameras[1].backoff_min: -1s is negative"}, nil},
		{"watchdog below its bound", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "stall_timeout": "1ns"}`, []string{"cameras[1].stall_timeout: 1ns is below 100ms (0: the default)"}, nil},
		{"timeout above its bound", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "request_timeout": "11m"}`, []string{"cameras[1].request_timeout: 11m0s is above 10m0s"}, nil},
		{"bad polygon", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "zones": [{"name": "a", "polygon": [[0, 0], [1.5, 0], [1, 1]]}]}`, []string{"cameras[1].zones[0].polygon"}, nil},
		{"missing calibration", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "calibration": "none.yaml"}`, []string{"cameras[1].calibration"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse("cfg.yaml", []byte(validConfig()), dir)
			if err != nil {
				t.Fatal(err)
			}
			e, err := ParseCameraEntry([]byte(c.entry))
			if err != nil {
				t.Fatal(err)
			}
			before := *cfg
			err = cfg.AddCamera(e)
			if len(c.parts) > 0 {
				if err == nil {
					t.Fatal("accepted")
				}
				for _, p := range c.parts {
					if !strings.Contains(err.Error(), p) {
						t.Fatalf("error %q does not name %q", err, p)
					}
				}
				if c.is != nil && !errors.Is(err, c.is) {
					t.Fatalf("error %q is not %v", err, c.is)
				}
				if len(cfg.Cameras) != 0 || cfg.Camera != before.Camera || cfg.AlertsConfig.Camera != "front" {
					t.Fatalf("a refused camera changed the config: %+v", cfg.Cameras)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			specs, err := cfg.CameraSpecs()
			if err != nil {
				t.Fatal(err)
			}
			if len(specs) != 2 || specs[0].Name != "front" || specs[0].Source != before.Camera || specs[0].Key != "cameras[0]" ||
				specs[1].Name != "rear" || specs[1].Key != "cameras[1]" || cfg.Camera != (CameraConfig{}) {
				t.Fatalf("cameras after the add: %+v", specs)
			}
			if zs := specs[0].Alerts.Zones; zs != nil || specs[0].Alerts.Grid == nil || specs[0].Alerts.Grid.Cols != 2 {
				t.Fatalf("the first camera lost its zones: %+v %+v", zs, specs[0].Alerts.Grid)
			}
			if q := specs[1].Source.Sequence; q != nil && q.Dir != dir+"/frames" {
				t.Fatalf("sequence dir %q, want it relative to the file's directory", q.Dir)
			}
			if e.Sequence != nil && e.Sequence.Dir != "frames" {
				t.Fatalf("the caller's entry was edited: %q", e.Sequence.Dir)
			}
		})
	}
	if _, err := ParseCameraEntry([]byte(`{"name": "rear", "urll": "rtsp://x"}`)); err == nil || !strings.Contains(err.Error(), "urll") {
		t.Fatalf("unknown key: %v", err)
	}
}

// TestRemoveCamera: a removed camera takes its thresholds and profile
// entries with it (the result still validates as a file would); the
// only camera and unknown names are refused.
func TestRemoveCamera(t *testing.T) {
	dir := configDir(t)
	text := strings.Replace(validConfig(), "camera:\n  url: rtsp://user:secret@127.0.0.1:8554/sim\n",
		"cameras:\n  - {name: front, url: \"rtsp://127.0.0.1/f\"}\n  - {name: rear, url: \"rtsp://127.0.0.1/r\"}\n", 1)
	text = strings.Replace(text, "  camera: front\n", "", 1)
	text += "thresholds: {rear: {tau_e: 0.5}, front: {tau_e: 0.6}}\nprofiles: {night: {cameras: {rear: {thresholds: {tau_e: 0.4}}, front: {thresholds: {tau_e: 0.3}}}}}\n"
	cfg, err := Parse("cfg.yaml", []byte(text), dir)
	if err != nil {
		t.Fatal(err)
	}
	orig := cfg.Thresholds
	if _, err := cfg.RemoveCamera("side"); !errors.Is(err, ErrNoCamera) || !strings.Contains(err.Error(), `no camera "side" (cameras: front, rear)`) {
		t.Fatalf("unknown camera: %v", err)
	}
	i, err := cfg.RemoveCamera("front")
	if err != nil || i != 0 {
		t.Fatalf("remove front: %d, %v", i, err)
	}
	if len(cfg.Cameras) != 1 || cfg.Cameras[0].Name != "rear" || len(cfg.Thresholds) != 1 || len(cfg.Profiles["night"].Cameras) != 1 {
		t.Fatalf("after the removal: %+v %+v %+v", cfg.Cameras, cfg.Thresholds, cfg.Profiles)
	}
	if len(orig) != 2 {
		t.Fatalf("the removal edited the old thresholds map in place: %v", orig)
	}
	if err := cfg.validateOverrides(); err != nil {
		t.Fatalf("overrides after the removal: %v", err)
	}
	if _, err := cfg.RemoveCamera("rear"); !errors.Is(err, ErrLastCamera) {
		t.Fatalf("the last camera: %v", err)
	}
	single, err := Parse("cfg.yaml", []byte(validConfig()), dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := single.RemoveCamera("front"); !errors.Is(err, ErrLastCamera) {
		t.Fatalf("the single camera: %v", err)
	}
}

// TestCameraLimit: pipeline.max_cameras bounds the file's cameras and
// those added at run time (the 17th of the default 16 is refused with
// ErrCameraLimit, naming the key).
func TestCameraLimit(t *testing.T) {
	dir := configDir(t)
	cfg, err := Parse("cfg.yaml", []byte(validConfig()), dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Pipeline.MaxCameras != DefaultMaxCameras || DefaultMaxCameras != 16 {
		t.Fatalf("default max_cameras %d", cfg.Pipeline.MaxCameras)
	}
	for i := 1; i < 16; i++ {
		e, err := ParseCameraEntry([]byte(fmt.Sprintf(`{"name": "c%d", "url": "rtsp://127.0.0.1/c%d"}`, i, i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.AddCamera(e); err != nil {
			t.Fatalf("camera %d of 16: %v", i+1, err)
		}
	}
	e, _ := ParseCameraEntry([]byte(`{"name": "c16", "url": "rtsp://127.0.0.1/c16"}`))
	err = cfg.AddCamera(e)
	if !errors.Is(err, ErrCameraLimit) || !strings.Contains(err.Error(), "cameras[16]: 16 cameras already, the most pipeline.max_cameras allows") {
		t.Fatalf("the 17th camera: %v", err)
	}
	if len(cfg.Cameras) != 16 {
		t.Fatalf("%d cameras after the refusal", len(cfg.Cameras))
	}
	for _, c := range []struct{ extra, msg string }{
		{"pipeline: {max_cameras: 0}\n", ""},
		{"pipeline: {max_cameras: 300}\n", "pipeline.max_cameras: 300 is not in 1..256"},
		{"pipeline: {max_cameras: -1}\n", "pipeline.max_cameras: -1 is not in 1..256"},
	} {
		_, err := Parse("cfg.yaml", []byte(validConfig()+c.extra), dir)
		if (c.msg == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.msg)) {
			t.Errorf("%q: %v, want %q", c.extra, err, c.msg)
		}
	}
}
