package runconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/camera/intrinsics"
	"github.com/didoedge/didoedge/internal/testmodels"
)

// TestCameraIntrinsics: a camera's intrinsics given inline or read from a
// KITTI calibration or a ROS CameraInfo YAML (path relative to the
// config), exclusive, checked with the key; a canonical-camera depth model
// refuses a camera without them.
func TestCameraIntrinsics(t *testing.T) {
	dir := configDir(t)
	kitti := "P_rect_02: 7.215377e+02 0 6.095593e+02 4.485728e+01 0 7.215377e+02 1.728540e+02 2.163791e-01 0 0 1 2.745884e-03\nS_rect_02: 1.242000e+03 3.750000e+02\n"
	if err := os.WriteFile(filepath.Join(dir, "calib_cam_to_cam.txt"), []byte(kitti), 0o644); err != nil {
		t.Fatal(err)
	}
	ros := "image_width: 640\nimage_height: 480\ncamera_matrix: {rows: 3, cols: 3, data: [500, 0, 320, 0, 501, 240, 0, 0, 1]}\n"
	if err := os.WriteFile(filepath.Join(dir, "left.yaml"), []byte(ros), 0o644); err != nil {
		t.Fatal(err)
	}
	url := "  url: rtsp://user:secret@127.0.0.1:8554/sim"
	canonical := func(s string) string {
		return strings.Replace(s, "depth: {name: depth, meaning: metric_depth}", "depth: {name: depth, meaning: metric_depth, canonical_focal: 1000}", 1)
	}
	for _, tc := range []struct {
		name  string
		edit  func(string) string
		want  *intrinsics.Intrinsics
		parts []string
	}{
		{"inline", func(s string) string {
			return strings.Replace(s, url, url+"\n  intrinsics: {fx: 720, fy: 721, cx: 320, cy: 96, width: 640, height: 192}", 1)
		},
			&intrinsics.Intrinsics{Fx: 720, Fy: 721, Cx: 320, Cy: 96, Width: 640, Height: 192}, nil},
		{"kitti file", func(s string) string {
			return strings.Replace(s, url, url+"\n  intrinsics_file: calib_cam_to_cam.txt", 1)
		},
			&intrinsics.Intrinsics{Fx: 721.5377, Fy: 721.5377, Cx: 609.5593, Cy: 172.854, Width: 1242, Height: 375}, nil},
		{"ros file", func(s string) string { return strings.Replace(s, url, url+"\n  intrinsics_file: left.yaml", 1) },
			&intrinsics.Intrinsics{Fx: 500, Fy: 501, Cx: 320, Cy: 240, Width: 640, Height: 480}, nil},
		{"canonical model with intrinsics", func(s string) string {
			return canonical(strings.Replace(s, url, url+"\n  intrinsics_file: left.yaml", 1))
		}, &intrinsics.Intrinsics{Fx: 500, Fy: 501, Cx: 320, Cy: 240, Width: 640, Height: 480}, nil},
		{"both", func(s string) string {
			return strings.Replace(s, url, url+"\n  intrinsics_file: left.yaml\n  intrinsics: {fx: 1, fy: 1, cx: 0, cy: 0}", 1)
		}, nil, []string{"cfg.yaml", "camera: intrinsics and intrinsics_file are exclusive"}},
		{"bad value", func(s string) string {
			return strings.Replace(s, url, url+"\n  intrinsics: {fx: -720, fy: 721, cx: 320, cy: 96}", 1)
		},
			nil, []string{"cfg.yaml", "camera.intrinsics: fx -720 and fy 721 must be positive"}},
		{"unknown key", func(s string) string {
			return strings.Replace(s, url, url+"\n  intrinsics: {fx: 720, fy: 721, cx: 320, cy: 96, skew: 0}", 1)
		},
			nil, []string{"cfg.yaml", "skew"}},
		{"missing file", func(s string) string { return strings.Replace(s, url, url+"\n  intrinsics_file: nowhere.txt", 1) },
			nil, []string{"cfg.yaml", "camera.intrinsics_file", "nowhere.txt"}},
		{"canonical model without intrinsics", canonical, nil,
			[]string{"cfg.yaml", "camera.intrinsics: the depth model", "depth.canonical_focal 1000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("cfg.yaml", []byte(tc.edit(validConfig())), dir)
			if tc.parts != nil {
				testmodels.MustContain(t, err, tc.parts...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			specs, err := c.CameraSpecs()
			if err != nil {
				t.Fatal(err)
			}
			if got := specs[0].Source.Intrinsics; got == nil || *got != *tc.want {
				t.Fatalf("intrinsics %+v, want %+v", got, tc.want)
			}
		})
	}
}
