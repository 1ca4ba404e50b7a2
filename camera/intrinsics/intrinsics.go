package intrinsics

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/didoedge/didoedge/internal/boundedfile"
	"github.com/didoedge/didoedge/internal/yamlstrict"
	"gopkg.in/yaml.v3"
)

// Intrinsics are pinhole intrinsics in pixels of frames Width x Height
// (0 x 0: of whatever frames they are used with).
type Intrinsics struct {
	Fx     float64 `yaml:"fx" json:"fx"`
	Fy     float64 `yaml:"fy" json:"fy"`
	Cx     float64 `yaml:"cx" json:"cx"`
	Cy     float64 `yaml:"cy" json:"cy"`
	Width  int     `yaml:"width,omitempty" json:"width,omitempty"`
	Height int     `yaml:"height,omitempty" json:"height,omitempty"`
}

// maxValue bounds every value: a focal length of 10^7 pixels is a
// telescope on a 16384-pixel sensor already.
const maxValue = 1e7

// maxSide bounds a calibration's image size, as every other size.
const maxSide = 1 << 14

// Validate checks the values: fx, fy positive, all finite, the size both
// given (1 to 16384) or both left out. Errors name the key.
func (in Intrinsics) Validate() error {
	var errs []error
	for _, v := range []struct {
		key string
		f   float64
	}{{"fx", in.Fx}, {"fy", in.Fy}, {"cx", in.Cx}, {"cy", in.Cy}} {
		if math.IsNaN(v.f) || math.IsInf(v.f, 0) {
			errs = append(errs, fmt.Errorf("%s: %g is not finite", v.key, v.f))
		} else if math.Abs(v.f) > maxValue {
			errs = append(errs, fmt.Errorf("%s: %g is beyond %g pixels", v.key, v.f, maxValue))
		}
	}
	if !(in.Fx > 0) || !(in.Fy > 0) {
		errs = append(errs, fmt.Errorf("fx %g and fy %g must be positive", in.Fx, in.Fy))
	}
	if (in.Width == 0) != (in.Height == 0) || in.Width < 0 || in.Height < 0 || in.Width > maxSide || in.Height > maxSide {
		errs = append(errs, fmt.Errorf("width %d and height %d: give both (1 to %d, the frame size the values are of) or neither", in.Width, in.Height, maxSide))
	}
	return errors.Join(errs...)
}

// Scaled returns the intrinsics for frames w x h (the package's rule);
// without a size of their own they are returned with w x h set.
func (in Intrinsics) Scaled(w, h int) Intrinsics {
	if in.Width == 0 || in.Height == 0 || (in.Width == w && in.Height == h) {
		in.Width, in.Height = w, h
		return in
	}
	sx, sy := float64(w)/float64(in.Width), float64(h)/float64(in.Height)
	return Intrinsics{Fx: in.Fx * sx, Fy: in.Fy * sy, Cx: (in.Cx+0.5)*sx - 0.5, Cy: (in.Cy+0.5)*sy - 0.5, Width: w, Height: h}
}

// String prints the values and the size they are of.
func (in Intrinsics) String() string {
	size := "the frames' size"
	if in.Width > 0 {
		size = fmt.Sprintf("%dx%d", in.Width, in.Height)
	}
	return fmt.Sprintf("fx %.6g fy %.6g cx %.6g cy %.6g (of %s)", in.Fx, in.Fy, in.Cx, in.Cy, size)
}

// ReadFile reads a calibration file: a ROS CameraInfo YAML (.yaml, .yml)
// or a KITTI calibration (anything else). Errors name the file.
func ReadFile(path string) (Intrinsics, error) {
	data, err := boundedfile.Read("", path, boundedfile.Calibration)
	if err != nil {
		return Intrinsics{}, fmt.Errorf("intrinsics: %w", err)
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		return ParseROS(data, path)
	}
	return ParseKITTI(data, path)
}

// KITTI keys of the left colour camera (image_02): calib_cam_to_cam.txt
// of the raw data has P_rect_02 and its image size S_rect_02; the
// odometry and object calib.txt have P2 and no size.
var kittiKeys = []string{"P_rect_02", "P2"}

// ParseKITTI reads the left colour camera's intrinsics from a KITTI
// calibration: its 3x4 projection P = K [R|t] (P_rect_02, or P2), fx =
// P[0], cx = P[2], fy = P[5], cy = P[6], with the size S_rect_02 when the
// file gives it. source names the file in errors.
func ParseKITTI(data []byte, source string) (Intrinsics, error) {
	vals := map[string][]float64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		key = strings.TrimSpace(key)
		if !ok || (key != "S_rect_02" && !contains(kittiKeys, key)) {
			continue // other cameras, calib_time, R, T, D...
		}
		var v []float64
		for _, f := range strings.Fields(rest) {
			x, err := strconv.ParseFloat(f, 64)
			if err != nil {
				// Not quoted: the file may be anything a key names.
				return Intrinsics{}, fmt.Errorf("kitti calibration %q line %d: %s: value %d is not a number", source, n, key, len(v)+1)
			}
			v = append(v, x)
		}
		vals[key] = v
	}
	if err := sc.Err(); err != nil {
		return Intrinsics{}, fmt.Errorf("kitti calibration %q: %w", source, err)
	}
	var p []float64
	var key string
	for _, k := range kittiKeys {
		if v, ok := vals[k]; ok {
			p, key = v, k
			break
		}
	}
	if p == nil {
		return Intrinsics{}, fmt.Errorf("kitti calibration %q: no P_rect_02 (calib_cam_to_cam.txt) or P2 (calib.txt) line", source)
	}
	if len(p) != 12 {
		return Intrinsics{}, fmt.Errorf("kitti calibration %q: %s: %d numbers, want the 12 of a 3x4 projection", source, key, len(p))
	}
	in := Intrinsics{Fx: p[0], Cx: p[2], Fy: p[5], Cy: p[6]}
	if s, ok := vals["S_rect_02"]; ok && key == "P_rect_02" {
		if len(s) != 2 || s[0] != math.Trunc(s[0]) || s[1] != math.Trunc(s[1]) || s[0] > maxSide || s[1] > maxSide {
			return Intrinsics{}, fmt.Errorf("kitti calibration %q: S_rect_02: %v, want the image's width and height", source, s)
		}
		in.Width, in.Height = int(s[0]), int(s[1])
	}
	if err := in.Validate(); err != nil {
		return Intrinsics{}, fmt.Errorf("kitti calibration %q: %s: %w", source, key, err)
	}
	return in, nil
}

// rosCameraInfo holds the keys of the two YAML forms of a ROS camera
// calibration: the camera_calibration_parsers file (image_width,
// camera_matrix) and a sensor_msgs/CameraInfo message as `rostopic echo`
// or `ros2 topic echo` print it (width, K or k). Other keys (distortion,
// rectification, header...) are ignored: they belong to the format.
type rosCameraInfo struct {
	ImageWidth   int        `yaml:"image_width"`
	ImageHeight  int        `yaml:"image_height"`
	CameraMatrix *rosMatrix `yaml:"camera_matrix"`
	Width        int        `yaml:"width"`
	Height       int        `yaml:"height"`
	K1           []float64  `yaml:"K"`
	K2           []float64  `yaml:"k"`
}

type rosMatrix struct {
	Rows int       `yaml:"rows"`
	Cols int       `yaml:"cols"`
	Data []float64 `yaml:"data"`
}

// ParseROS reads a ROS CameraInfo YAML: K = [fx 0 cx; 0 fy cy; 0 0 1] row
// major, and the image size. source names the file in errors.
func ParseROS(data []byte, source string) (Intrinsics, error) {
	var ci rosCameraInfo
	if err := yaml.Unmarshal(data, &ci); err != nil {
		// Redacted: the file may be anything a key names.
		return Intrinsics{}, fmt.Errorf("ros camera info %q: %w", source, yamlstrict.Redact(err))
	}
	var k []float64
	key := ""
	switch {
	case ci.CameraMatrix != nil:
		key, k = "camera_matrix.data", ci.CameraMatrix.Data
		if (ci.CameraMatrix.Rows != 0 || ci.CameraMatrix.Cols != 0) && (ci.CameraMatrix.Rows != 3 || ci.CameraMatrix.Cols != 3) {
			return Intrinsics{}, fmt.Errorf("ros camera info %q: camera_matrix: %dx%d, want 3x3", source, ci.CameraMatrix.Rows, ci.CameraMatrix.Cols)
		}
	case ci.K1 != nil:
		key, k = "K", ci.K1
	case ci.K2 != nil:
		key, k = "k", ci.K2
	default:
		return Intrinsics{}, fmt.Errorf("ros camera info %q: no camera_matrix, K or k", source)
	}
	if len(k) != 9 {
		return Intrinsics{}, fmt.Errorf("ros camera info %q: %s: %d numbers, want the 9 of a 3x3 matrix", source, key, len(k))
	}
	if k[1] != 0 || k[3] != 0 || k[6] != 0 || k[7] != 0 || k[8] != 1 {
		return Intrinsics{}, fmt.Errorf("ros camera info %q: %s: %v is not [fx 0 cx, 0 fy cy, 0 0 1] (skew or a projective row)", source, key, k)
	}
	in := Intrinsics{Fx: k[0], Cx: k[2], Fy: k[4], Cy: k[5], Width: ci.ImageWidth, Height: ci.ImageHeight}
	if in.Width == 0 && in.Height == 0 {
		in.Width, in.Height = ci.Width, ci.Height
	}
	if err := in.Validate(); err != nil {
		return Intrinsics{}, fmt.Errorf("ros camera info %q: %w", source, err)
	}
	return in, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// ParseList reads "fx,fy,cx,cy" or "fx,fy,cx,cy,width,height" (a flag's
// form).
func ParseList(s string) (Intrinsics, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 4 && len(parts) != 6 {
		return Intrinsics{}, fmt.Errorf("intrinsics %q: want fx,fy,cx,cy or fx,fy,cx,cy,width,height", s)
	}
	v := make([]float64, len(parts))
	for i, p := range parts {
		x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return Intrinsics{}, fmt.Errorf("intrinsics %q: %q is not a number", s, p)
		}
		v[i] = x
	}
	in := Intrinsics{Fx: v[0], Fy: v[1], Cx: v[2], Cy: v[3]}
	if len(v) == 6 {
		if v[4] != math.Trunc(v[4]) || v[5] != math.Trunc(v[5]) || math.Abs(v[4]) > maxSide || math.Abs(v[5]) > maxSide {
			return Intrinsics{}, fmt.Errorf("intrinsics %q: width %g and height %g must be whole pixels up to %d", s, v[4], v[5], maxSide)
		}
		in.Width, in.Height = int(v[4]), int(v[5])
	}
	if err := in.Validate(); err != nil {
		return Intrinsics{}, fmt.Errorf("intrinsics %q: %w", s, err)
	}
	return in, nil
}
