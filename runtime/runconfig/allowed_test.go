package runconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/internal/testmodels"
)

// secretLine is a file's first line that must not come back in an error
// (the shape of /etc/shadow's first line: YAML reads it as a key).
const secretLine = "root:$y$j9T$Zq8sEcReT0kEn$abc:19700:0:99999:7:::"

// TestAddCameraAllowedDirs: a control request's paths are refused outside
// live.allowed_dirs (default the config's directory) before anything is
// read, links included; a file inside that is not a calibration gets an
// error that names the key and the path but not the file's content.
func TestAddCameraAllowedDirs(t *testing.T) {
	dir := configDir(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "cal.yaml"), []byte(testmodels.QuietCalibration), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte(secretLine+"\ndaemon:*:19700:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "cal.yaml"), filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.yaml")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, allowed, entry string
		parts                []string
		is                   error
	}{
		{"inside the config's directory", "", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "calibration": "quiet.yaml"}`, nil, nil},
		{"absolute path elsewhere", "", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "calibration": "` + filepath.Join(outside, "cal.yaml") + `"}`,
			[]string{"cameras[1].calibration:", "cal.yaml", "not under live.allowed_dirs"}, ErrNotAllowed},
		{"/dev/zero", "", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "calibration": "/dev/zero"}`,
			[]string{"cameras[1].calibration:", "/dev/zero", "not under live.allowed_dirs"}, ErrNotAllowed},
		{"a link inside to a file outside", "", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "calibration": "link.yaml"}`,
			[]string{"cameras[1].calibration:", "link.yaml", "not under live.allowed_dirs"}, ErrNotAllowed},
		{"a link inside to /dev/zero", "", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "calibration": "zero.yaml"}`,
			[]string{"cameras[1].calibration:", "not under live.allowed_dirs"}, ErrNotAllowed},
		{"dot-dot out", "", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "intrinsics_file": "../x/../../etc/passwd"}`,
			[]string{"cameras[1].intrinsics_file:"}, nil},
		{"sequence dir elsewhere", "", `{"name": "rear", "sequence": {"dir": "/"}}`,
			[]string{"cameras[1].sequence.dir:", "not under live.allowed_dirs"}, ErrNotAllowed},
		{"a secret inside is not echoed", "", `{"name": "rear", "url": "rtsp://127.0.0.1/r", "calibration": "secret"}`,
			[]string{"cameras[1].calibration:", "secret", "line 1: unknown key"}, nil},
		{"configured directory", outside, `{"name": "rear", "url": "rtsp://127.0.0.1/r", "calibration": "` + filepath.Join(outside, "cal.yaml") + `"}`, nil, nil},
		{"configured directory only", outside, `{"name": "rear", "url": "rtsp://127.0.0.1/r", "calibration": "quiet.yaml"}`,
			[]string{"cameras[1].calibration:", "not under live.allowed_dirs"}, ErrNotAllowed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := validConfig()
			if c.allowed != "" {
				doc += "live:\n  allowed_dirs: [" + c.allowed + "]\n"
			}
			cfg, err := Parse("cfg.yaml", []byte(doc), dir)
			if err != nil {
				t.Fatal(err)
			}
			e, err := ParseCameraEntry([]byte(c.entry))
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.AddCamera(e)
			if len(c.parts) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
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
			for _, leak := range []string{"root", "$y$", "daemon", "19700"} {
				if strings.Contains(err.Error(), leak) {
					t.Fatalf("error %q quotes the file (%q)", err, leak)
				}
			}
		})
	}
}
