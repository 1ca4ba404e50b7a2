package intrinsics

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kittiCamToCam is the head of KITTI raw's 2011_09_26 calib_cam_to_cam.txt
// (cameras 00 and 02; the file has 00 to 03).
const kittiCamToCam = `calib_time: 09-Jan-2012 13:57:47
corner_dist: 9.950000e-02
S_00: 1.392000e+03 5.120000e+02
K_00: 9.842439e+02 0.000000e+00 6.900000e+02 0.000000e+00 9.808141e+02 2.331966e+02 0.000000e+00 0.000000e+00 1.000000e+00
P_rect_00: 7.215377e+02 0.000000e+00 6.095593e+02 0.000000e+00 0.000000e+00 7.215377e+02 1.728540e+02 0.000000e+00 0.000000e+00 0.000000e+00 1.000000e+00 0.000000e+00
S_rect_02: 1.242000e+03 3.750000e+02
R_rect_02: 9.998817e-01 1.511453e-02 -2.841595e-03 -1.511724e-02 9.998853e-01 -9.338510e-04 2.827154e-03 9.766976e-04 9.999955e-01
P_rect_02: 7.215377e+02 0.000000e+00 6.095593e+02 4.485728e+01 0.000000e+00 7.215377e+02 1.728540e+02 2.163791e-01 0.000000e+00 0.000000e+00 1.000000e+00 2.745884e-03
`

// kittiOdometry is a KITTI odometry calib.txt (sequence 00): P2, no size.
const kittiOdometry = `P0: 7.188560000000e+02 0.000000000000e+00 6.071928000000e+02 0.000000000000e+00 0.000000000000e+00 7.188560000000e+02 1.852157000000e+02 0.000000000000e+00 0.000000000000e+00 0.000000000000e+00 1.000000000000e+00 0.000000000000e+00
P2: 7.188560000000e+02 0.000000000000e+00 6.071928000000e+02 4.538225000000e+01 0.000000000000e+00 7.188560000000e+02 1.852157000000e+02 -1.130887000000e-01 0.000000000000e+00 0.000000000000e+00 1.000000000000e+00 3.779761000000e-03
Tr: 4.276802385584e-04 -9.999672484946e-01 -8.084491683471e-03 -1.198459927713e-02 -7.210626507497e-03 8.081198471645e-03 -9.999413164504e-01 -5.403984729748e-02 9.999738645903e-01 4.859485810390e-04 -7.206933692422e-03 -2.921968648686e-01
`

// rosCalibration is the camera_calibration_parsers form (the ROS camera
// calibration tutorial's narrow_stereo/left).
const rosCalibration = `image_width: 640
image_height: 480
camera_name: narrow_stereo/left
camera_matrix:
  rows: 3
  cols: 3
  data: [430.215550, 0.000000, 306.691343, 0.000000, 430.531693, 227.224800, 0.000000, 0.000000, 1.000000]
distortion_model: plumb_bob
distortion_coefficients:
  rows: 1
  cols: 5
  data: [-0.337586, 0.111476, -0.000923, -0.000160, 0.000000]
rectification_matrix:
  rows: 3
  cols: 3
  data: [1, 0, 0, 0, 1, 0, 0, 0, 1]
`

// rosMessage is a sensor_msgs/CameraInfo as `rostopic echo` prints it.
const rosMessage = `header:
  seq: 12
  stamp: {secs: 1, nsecs: 0}
  frame_id: camera
height: 720
width: 1280
distortion_model: plumb_bob
D: [0.0, 0.0, 0.0, 0.0, 0.0]
K: [910.5, 0.0, 640.2, 0.0, 909.8, 360.7, 0.0, 0.0, 1.0]
R: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
P: [910.5, 0.0, 640.2, 0.0, 0.0, 909.8, 360.7, 0.0, 0.0, 0.0, 1.0, 0.0]
binning_x: 0
`

func TestParseFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   func([]byte, string) (Intrinsics, error)
		text string
		want Intrinsics
	}{
		{"kitti raw", ParseKITTI, kittiCamToCam, Intrinsics{Fx: 721.5377, Fy: 721.5377, Cx: 609.5593, Cy: 172.854, Width: 1242, Height: 375}},
		{"kitti odometry", ParseKITTI, kittiOdometry, Intrinsics{Fx: 718.856, Fy: 718.856, Cx: 607.1928, Cy: 185.2157}},
		{"ros calibration", ParseROS, rosCalibration, Intrinsics{Fx: 430.21555, Fy: 430.531693, Cx: 306.691343, Cy: 227.2248, Width: 640, Height: 480}},
		{"ros message", ParseROS, rosMessage, Intrinsics{Fx: 910.5, Fy: 909.8, Cx: 640.2, Cy: 360.7, Width: 1280, Height: 720}},
		{"ros2 message", ParseROS, strings.Replace(strings.Replace(rosMessage, "K:", "k:", 1), "D:", "d:", 1),
			Intrinsics{Fx: 910.5, Fy: 909.8, Cx: 640.2, Cy: 360.7, Width: 1280, Height: 720}},
	} {
		got, err := tc.fn([]byte(tc.text), tc.name)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		fn   func([]byte, string) (Intrinsics, error)
		text string
		want string
	}{
		{ParseKITTI, "P0: 1 0 0 0 0 1 0 0 0 0 1 0\n", "no P_rect_02 (calib_cam_to_cam.txt) or P2 (calib.txt) line"},
		{ParseKITTI, "P2: 1 0 0 0 0 1\n", "P2: 6 numbers, want the 12"},
		{ParseKITTI, "P2: 1 0 0 0 0 x 0 0 0 0 1 0\n", `line 1: P2: value 6 is not a number`},
		{ParseKITTI, "P2: -7 0 600 0 0 7 180 0 0 0 1 0\n", "fx -7 and fy 7 must be positive"},
		{ParseKITTI, "P_rect_02: 7 0 600 0 0 7 180 0 0 0 1 0\nS_rect_02: 1242.5 375\n", "S_rect_02"},
		{ParseROS, "image_width: 640\n", "no camera_matrix, K or k"},
		{ParseROS, "K: [1, 0, 2, 0, 1, 3, 0, 0]\n", "K: 8 numbers"},
		{ParseROS, "K: [1, 0.5, 2, 0, 1, 3, 0, 0, 1]\n", "skew"},
		{ParseROS, "camera_matrix: {rows: 3, cols: 4, data: []}\n", "camera_matrix: 3x4"},
		{ParseROS, "image_width: 640\nK: [1, 0, 2, 0, 1, 3, 0, 0, 1]\n", "width 640 and height 0"},
		{ParseROS, "K: [1, 0, 2, 0, .nan, 3, 0, 0, 1]\n", "fy: NaN is not finite"},
		{ParseROS, "K: {a: 1}\n", "ros camera info"},
	} {
		_, err := tc.fn([]byte(tc.text), "calib.file")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "calib.file") {
			t.Errorf("%q: err = %v, want %q and the file", tc.text, err, tc.want)
		}
	}
}

// TestScaled: KITTI's 1242x375 calibration on 640x192 frames, by the rule
// of the package doc, and the ray of a pixel is unchanged: (u - cx)/fx in
// the calibration's frame equals (u' - cx')/fx' at u' = (u + 0.5) sx - 0.5.
func TestScaled(t *testing.T) {
	in := Intrinsics{Fx: 721.5377, Fy: 721.5377, Cx: 609.5593, Cy: 172.854, Width: 1242, Height: 375}
	s := in.Scaled(640, 192)
	sx, sy := 640.0/1242, 192.0/375
	want := Intrinsics{Fx: 721.5377 * sx, Fy: 721.5377 * sy, Cx: (609.5593+0.5)*sx - 0.5, Cy: (172.854+0.5)*sy - 0.5, Width: 640, Height: 192}
	if s != want {
		t.Fatalf("scaled %+v, want %+v", s, want)
	}
	for _, u := range []float64{0, 100.25, 609.5593, 1241} {
		u2 := (u+0.5)*sx - 0.5
		if a, b := (u-in.Cx)/in.Fx, (u2-s.Cx)/s.Fx; math.Abs(a-b) > 1e-12 {
			t.Errorf("pixel %v: ray %v, scaled %v", u, a, b)
		}
	}
	if got := in.Scaled(1242, 375); got != in {
		t.Errorf("same size changed %+v into %+v", in, got)
	}
	free := Intrinsics{Fx: 500, Fy: 500, Cx: 320, Cy: 240}
	if got := free.Scaled(640, 480); got != (Intrinsics{Fx: 500, Fy: 500, Cx: 320, Cy: 240, Width: 640, Height: 480}) {
		t.Errorf("sizeless intrinsics scaled to %+v", got)
	}
}

func TestReadFileByExtension(t *testing.T) {
	dir := t.TempDir()
	k, r := filepath.Join(dir, "calib_cam_to_cam.txt"), filepath.Join(dir, "left.yaml")
	if err := os.WriteFile(k, []byte(kittiCamToCam), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r, []byte(rosCalibration), 0o644); err != nil {
		t.Fatal(err)
	}
	if in, err := ReadFile(k); err != nil || in.Width != 1242 {
		t.Errorf("kitti file: %+v %v", in, err)
	}
	if in, err := ReadFile(r); err != nil || in.Width != 640 {
		t.Errorf("ros file: %+v %v", in, err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.txt")); err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Errorf("missing file: %v", err)
	}
}

func FuzzParseKITTI(f *testing.F) {
	f.Add([]byte(kittiCamToCam))
	f.Add([]byte(kittiOdometry))
	f.Add([]byte("P2: 1 0 0 0 0 1 0 0 0 0 1 0\nS_rect_02: 10 10\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := ParseKITTI(data, "fuzz.txt")
		if err != nil {
			return
		}
		if err := in.Validate(); err != nil {
			t.Fatalf("accepted %+v: %v", in, err)
		}
	})
}

func FuzzParseROS(f *testing.F) {
	f.Add([]byte(rosCalibration))
	f.Add([]byte(rosMessage))
	f.Add([]byte("k: [1, 0, 2, 0, 1, 3, 0, 0, 1]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := ParseROS(data, "fuzz.yaml")
		if err != nil {
			return
		}
		if err := in.Validate(); err != nil {
			t.Fatalf("accepted %+v: %v", in, err)
		}
		if s := in.Scaled(64, 32); !(s.Fx > 0) || math.IsInf(s.Fx, 0) {
			t.Fatalf("accepted %+v scales to %+v", in, s)
		}
	})
}
