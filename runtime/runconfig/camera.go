package runconfig

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/camera/intrinsics"
	"github.com/didoedge/didoedge/internal/redact"
)

// CameraConfig selects the frame source: an RTSP URL or an image sequence.
type CameraConfig struct {
	URL string `yaml:"url"` // rtsp:// or rtsps://
	// UDP selects RTP over UDP (default TCP interleaved).
	UDP            bool          `yaml:"udp"`
	StallTimeout   time.Duration `yaml:"stall_timeout"`   // RTSP watchdog (default 2s)
	BackoffMin     time.Duration `yaml:"backoff_min"`     // reconnect delay bounds (250ms, 5s)
	BackoffMax     time.Duration `yaml:"backoff_max"`     //
	RequestTimeout time.Duration `yaml:"request_timeout"` // RTSP requests (5s)
	// Sequence plays a directory of PNG/JPEG images instead of RTSP.
	Sequence *SequenceConfig `yaml:"sequence"`
	// Intrinsics are the camera's fx, fy, cx, cy in pixels, of frames
	// width x height when given (they scale with the frame: package
	// camera/intrinsics), else of the frames as they come. A depth model
	// with canonical_focal (Metric3D) needs them; the recorder records
	// them as the camera's calibration when the record section gives none.
	Intrinsics *intrinsics.Intrinsics `yaml:"intrinsics"`
	// IntrinsicsFile reads them from a KITTI calibration (P_rect_02 of
	// calib_cam_to_cam.txt, or P2) or a ROS CameraInfo YAML (K); exclusive
	// with intrinsics.
	IntrinsicsFile string `yaml:"intrinsics_file"`
	// intrinsicsRead: Intrinsics hold what IntrinsicsFile gave.
	intrinsicsRead bool
}

// CameraEntry is one camera of the cameras list.
type CameraEntry struct {
	// Name is the camera id in topics, events, metrics and episode ids.
	Name         string `yaml:"name"`
	CameraConfig `yaml:",inline"`
	// Calibration is the camera's calibration file (didoedge calibrate);
	// empty: alerts.calibration.
	Calibration string `yaml:"calibration"`
	// Zones, grid and ignore masks of the camera; without zones and grid
	// the alerts section's zones (and its ignore masks, unless the camera
	// gives its own) apply.
	alerts.ZoneSet `yaml:",inline"`
}

// SequenceConfig is an image-sequence source.
type SequenceConfig struct {
	Dir  string  `yaml:"dir"`
	FPS  float64 `yaml:"fps"` // 0: as fast as the pipeline consumes
	Loop bool    `yaml:"loop"`
}

// cameraSources lists the camera sections with their keys.
func (c *Config) cameraSources() []struct {
	key string
	src *CameraConfig
} {
	var out []struct {
		key string
		src *CameraConfig
	}
	if len(c.Cameras) == 0 {
		return append(out, struct {
			key string
			src *CameraConfig
		}{"camera", &c.Camera})
	}
	for i := range c.Cameras {
		out = append(out, struct {
			key string
			src *CameraConfig
		}{fmt.Sprintf("cameras[%d]", i), &c.Cameras[i].CameraConfig})
	}
	return out
}

// validateIntrinsics checks the camera's intrinsics, or reads them from
// intrinsics_file into Intrinsics (the file's name stays).
func (c *CameraConfig) validateIntrinsics(key string) error {
	switch {
	case c.intrinsicsRead:
	case c.Intrinsics != nil && c.IntrinsicsFile != "":
		return fmt.Errorf("%s: intrinsics and intrinsics_file are exclusive", key)
	case c.Intrinsics != nil:
		if err := c.Intrinsics.Validate(); err != nil {
			return fmt.Errorf("%s.intrinsics: %w", key, err)
		}
	case c.IntrinsicsFile != "":
		in, err := intrinsics.ReadFile(c.IntrinsicsFile)
		if err != nil {
			return fmt.Errorf("%s.intrinsics_file: %w", key, err)
		}
		c.Intrinsics, c.intrinsicsRead = &in, true
	}
	return nil
}

// validate checks a camera source; key is "camera" or "cameras[i]".
func (c *CameraConfig) validate(key string) error {
	if err := c.validateIntrinsics(key); err != nil {
		return err
	}
	switch {
	case c.URL == "" && c.Sequence == nil:
		return fmt.Errorf("%s: give url (RTSP) or sequence (image directory)", key)
	case c.URL != "" && c.Sequence != nil:
		return fmt.Errorf("%s: url and sequence are exclusive", key)
	case c.URL != "":
		if !strings.HasPrefix(c.URL, "rtsp://") && !strings.HasPrefix(c.URL, "rtsps://") {
			return fmt.Errorf("%s.url: %q must start with rtsp:// or rtsps://", key, redact.URL(c.URL))
		}
		if err := camera.ValidateRTSPURL(c.URL); err != nil {
			return fmt.Errorf("%s.url: %w", key, err)
		}
	default:
		if c.Sequence.Dir == "" {
			return fmt.Errorf("%s.sequence.dir: empty", key)
		}
		if st, err := os.Stat(c.Sequence.Dir); err != nil || !st.IsDir() {
			return fmt.Errorf("%s.sequence.dir: %q is not a directory", key, c.Sequence.Dir)
		}
		if c.Sequence.FPS < 0 {
			return fmt.Errorf("%s.sequence.fps: %g is negative", key, c.Sequence.FPS)
		}
	}
	// 0 is the RTSP client's default; otherwise a value below min makes
	// the watchdog or the reconnects a busy loop, above max the camera
	// is never noticed dead.
	for _, d := range []struct {
		key      string
		v        time.Duration
		min, max time.Duration
	}{{"stall_timeout", c.StallTimeout, 100 * time.Millisecond, time.Hour}, {"backoff_min", c.BackoffMin, 10 * time.Millisecond, 10 * time.Minute},
		{"backoff_max", c.BackoffMax, 10 * time.Millisecond, time.Hour}, {"request_timeout", c.RequestTimeout, 100 * time.Millisecond, 10 * time.Minute}} {
		switch {
		case d.v < 0:
			return fmt.Errorf("%s.%s: %v is negative", key, d.key, d.v)
		case d.v > 0 && d.v < d.min:
			return fmt.Errorf("%s.%s: %v is below %v (0: the default)", key, d.key, d.v, d.min)
		case d.v > d.max:
			return fmt.Errorf("%s.%s: %v is above %v", key, d.key, d.v, d.max)
		}
	}
	if c.Sequence != nil && c.Sequence.FPS > 1000 {
		return fmt.Errorf("%s.sequence.fps: %g is above 1000", key, c.Sequence.FPS)
	}
	return nil
}
