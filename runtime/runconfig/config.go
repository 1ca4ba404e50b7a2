package runconfig

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/didoedge/didoedge/internal/boundedfile"

	"gopkg.in/yaml.v3"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/camera/intrinsics"
	"github.com/didoedge/didoedge/internal/httpguard"
	"github.com/didoedge/didoedge/internal/redact"
	"github.com/didoedge/didoedge/internal/yamlstrict"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
	"github.com/didoedge/didoedge/runtime/record"
)

// Config is the whole runtime configuration: one file embeds the camera,
// inference, alerts and HTTP sections. See configs/vehicle.yaml and
// docs/runtime.md for every key.
type Config struct {
	// Camera is the single-camera form; its id is alerts.camera and its
	// zones and calibration are the alerts section's.
	Camera CameraConfig `yaml:"camera"`
	// Cameras is the multi-camera form (exclusive with Camera): every
	// camera has its name, source, and optionally its own zones, ignore
	// masks and calibration (default: the alerts section's).
	Cameras   []CameraEntry  `yaml:"cameras"`
	Inference onnxrt.Config  `yaml:"inference"`
	Depth     ModelConfig    `yaml:"depth"`
	AuxUE     AuxUEConfig    `yaml:"auxue"`
	Alerts    yaml.Node      `yaml:"alerts"` // an AlertsConfig; parsed into the field AlertsConfig
	HTTP      HTTPConfig     `yaml:"http"`
	Pipeline  PipelineConfig `yaml:"pipeline"`
	// Record is the MCAP recorder (docs/recording.md); off by default.
	Record record.Config `yaml:"record"`
	// Live is the Foxglove WebSocket live view and control API
	// (docs/live.md); off by default.
	Live LiveConfig `yaml:"live"`
	// Domain is the domain monitor (domain.go; docs/alerts.md).
	Domain DomainConfig `yaml:"domain"`
	// Thresholds override each camera's calibration thresholds, by
	// camera name (the control API and Foxglove parameters write them).
	Thresholds map[string]Thresholds `yaml:"thresholds"`
	// Profiles are named sets of zone, threshold and event overrides;
	// Profile names the active one ("" none).
	Profiles map[string]Profile `yaml:"profiles"`
	Profile  string             `yaml:"profile"`

	// AlertsConfig is the parsed alerts section, with relative paths
	// resolved against the config file's directory.
	AlertsConfig AlertsConfig `yaml:"-"`
	// Path is the file Load read ("" when parsed from memory); SIGHUP
	// re-reads it.
	Path string `yaml:"-"`
	// dir anchors relative paths (the file's directory, or Parse's dir):
	// cameras added at run time resolve theirs against it.
	dir string
}

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

// CameraSpec is one camera of a configuration after defaults: its source
// and the alerts config its engine is built from (camera id, zones,
// ignore masks and calibration resolved).
type CameraSpec struct {
	Name   string
	Source CameraConfig
	Alerts alerts.Config
	// Key is the config key that describes it ("camera" or "cameras[i]"),
	// for messages; ZoneKey prefixes its zone errors ("alerts" for the
	// single camera form).
	Key, ZoneKey string
	// Thresholds override the calibration file's (thresholds: and the
	// active profile); ThresholdsKey names them in errors.
	Thresholds    Thresholds
	ThresholdsKey string
	// DomainPolicy is domain.policy: what its zone episodes do while the
	// camera is shifted.
	DomainPolicy alerts.DomainPolicy
}

// EngineSpec loads the camera's calibration and resolves its zones.
func (cs CameraSpec) EngineSpec() (alerts.EngineSpec, error) {
	spec, err := cs.Alerts.EngineSpec(cs.ZoneKey)
	if err != nil && !strings.HasPrefix(err.Error(), cs.ZoneKey) {
		key := "alerts.calibration"
		if cs.Key != "camera" {
			key = cs.Key + ".calibration"
		}
		err = fmt.Errorf("%s: %w", key, err)
	}
	if err != nil {
		return spec, err
	}
	if err := cs.Thresholds.apply(&spec.Calibration, spec.Zones, cs.ThresholdsKey); err != nil {
		return alerts.EngineSpec{}, err
	}
	spec.Config.DomainPolicy = cs.DomainPolicy
	return spec, nil
}

// SequenceConfig is an image-sequence source.
type SequenceConfig struct {
	Dir  string  `yaml:"dir"`
	FPS  float64 `yaml:"fps"` // 0: as fast as the pipeline consumes
	Loop bool    `yaml:"loop"`
}

// ModelConfig names an ONNX model and its IO spec (runtime/infer.IOSpec,
// the model description `didoedge train depth|auxue` writes beside each
// model), given either inline (io) or as a file (io_spec; description is
// the same key under another name).
type ModelConfig struct {
	Model       string        `yaml:"model"`
	IOSpec      string        `yaml:"io_spec"`
	Description string        `yaml:"description"`
	IO          *infer.IOSpec `yaml:"io"`
}

// AuxUEConfig is the AuxUE model; its spec has kind auxue (the kind may be
// left out here). An AuxUE that owns its input contract (depth_input in
// its spec, what train auxue writes) reads the depth model's image input
// and depth map itself: leave inputs out. For an AuxUE with one features
// input, Inputs lists what is concatenated, channel after channel, into
// it: "image" (the depth model's normalized input), "depth" (the depth
// read-out times depth_scale), or the name of a depth-model feature
// output (`didoedge model expose`).
type AuxUEConfig struct {
	ModelConfig `yaml:",inline"`
	Inputs      []string `yaml:"inputs"`
	DepthScale  float32  `yaml:"depth_scale"` // 0 means 1
}

// HTTPConfig is the debug page, /metrics, /healthz and /readyz.
type HTTPConfig struct {
	// Listen is the bind address (default 127.0.0.1:8080); "off" disables.
	Listen string `yaml:"listen"`
	// MaxFPS bounds how often maps are copied for the page (default 4).
	MaxFPS float64 `yaml:"max_fps"`
	// AllowedHosts are the names, besides loopback and the listener's own
	// addresses, that browsers and scrapers use to reach the page
	// (van-07.local): any other Host header is refused (421) against DNS
	// rebinding (internal/httpguard, docs/security.md).
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// PipelineConfig tunes the frame loop.
type PipelineConfig struct {
	// Tick is how often stall detection and stats run (default 250ms).
	Tick time.Duration `yaml:"tick"`
	// BatchSize is the most frames (of different cameras) one run of each
	// model takes. 0 (the default) means min(cameras, 4) when a GPU
	// provider is configured and both models have a dynamic batch
	// dimension, and 1 otherwise (Config.DefaultBatchSize); above 1 both
	// models must have one (didoedge model batch).
	BatchSize int `yaml:"batch_size"`
	// CameraRestart: a camera that processed no frame for this long has
	// its source restarted inside the process (and again every
	// camera_restart while it stays dead), while the other cameras go on;
	// the unit is restarted only when the whole pipeline is stuck
	// (docs/deploy.md). Default 10s.
	CameraRestart time.Duration `yaml:"camera_restart"`
	// MaxCameras bounds the cameras of the file and those added at run
	// time (POST /api/cameras): each costs a fetcher, an engine, metrics
	// series and buffers (default DefaultMaxCameras, at most 256).
	MaxCameras int `yaml:"max_cameras"`
}

// DefaultMaxCameras is pipeline.max_cameras's default.
const DefaultMaxCameras = 16

// Input sources of the AuxUE besides depth-model feature names.
const (
	InputImage = infer.SourceImage
	InputDepth = infer.SourceDepth
)

// DefaultCameraRestart is pipeline.camera_restart's default: longer than
// an RTSP client's own reconnect cycle (backoff_max 5s), so that a restart
// is for a camera its client did not bring back.
const DefaultCameraRestart = 10 * time.Second

// HTTPOff disables the HTTP server.
const HTTPOff = "off"

// Load reads and validates a config file; relative paths in it are
// relative to the file's directory.
func Load(path string) (*Config, error) {
	data, err := boundedfile.Read("", path, boundedfile.Config)
	if err != nil {
		return nil, fmt.Errorf("load runtime config: %w", err)
	}
	c, err := Parse(path, data, filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	c.Path = path
	return c, nil
}

// Parse decodes and validates config data; name labels errors and dir
// anchors relative paths.
func Parse(name string, data []byte, dir string) (*Config, error) {
	c := &Config{}
	if err := yamlstrict.Decode(data, c); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := c.finish(name, dir); err != nil {
		return nil, err
	}
	return c, nil
}

// finish applies defaults, resolves paths and validates every section.
func (c *Config) finish(name, dir string) error {
	c.dir = dir
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	abs(&c.Depth.Model)
	abs(&c.Depth.IOSpec)
	abs(&c.Depth.Description)
	abs(&c.AuxUE.Model)
	abs(&c.AuxUE.IOSpec)
	abs(&c.AuxUE.Description)
	if c.Camera.Sequence != nil {
		abs(&c.Camera.Sequence.Dir)
	}
	abs(&c.Camera.IntrinsicsFile)
	for i := range c.Cameras {
		if q := c.Cameras[i].Sequence; q != nil {
			abs(&q.Dir)
		}
		abs(&c.Cameras[i].IntrinsicsFile)
		abs(&c.Cameras[i].Calibration)
	}
	if c.Inference.Library != "" {
		abs(&c.Inference.Library)
	}
	for i := range c.Live.AllowedDirs {
		abs(&c.Live.AllowedDirs[i])
	}
	if c.HTTP.Listen == "" {
		c.HTTP.Listen = "127.0.0.1:8080"
	}
	if c.HTTP.MaxFPS == 0 {
		c.HTTP.MaxFPS = 4
	}
	if c.Pipeline.CameraRestart == 0 {
		c.Pipeline.CameraRestart = DefaultCameraRestart
	}
	if c.Pipeline.MaxCameras == 0 {
		c.Pipeline.MaxCameras = DefaultMaxCameras
	}
	if c.Pipeline.Tick == 0 {
		c.Pipeline.Tick = 250 * time.Millisecond
	}
	if c.AuxUE.DepthScale == 0 {
		c.AuxUE.DepthScale = 1
	}
	c.Domain.defaults()

	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(c.Cameras) == 0 {
		add(c.Camera.validate("camera"))
	} else if c.Camera != (CameraConfig{}) {
		add(errors.New("camera and cameras are exclusive: give one camera section or a cameras list"))
	}
	seen := map[string]int{}
	for i, e := range c.Cameras {
		key := fmt.Sprintf("cameras[%d]", i)
		switch err := alerts.ValidCamera(e.Name); {
		case e.Name == "":
			add(fmt.Errorf("%s.name: empty; every camera needs a name (its topic level)", key))
		case err != nil:
			add(fmt.Errorf("%s.name: %w", key, err))
		default:
			if j, dup := seen[e.Name]; dup {
				add(fmt.Errorf("%s.name: %q is also cameras[%d].name", key, e.Name, j))
			}
			seen[e.Name] = i
		}
		add(c.Cameras[i].CameraConfig.validate(key))
	}
	if err := c.Inference.Validate(); err != nil {
		add(fmt.Errorf("inference.%w", err))
	}
	add(c.Domain.validate())
	if c.Inference.Library != "" {
		add(checkFile("inference.library", c.Inference.Library))
	}
	add(c.Depth.resolve("depth", infer.KindDepth))
	add(c.AuxUE.resolve("auxue", infer.KindAuxUE))
	if a := c.AuxUE.IO; a != nil && len(c.AuxUE.Inputs) == 0 && c.Depth.IO != nil {
		c.AuxUE.Inputs = infer.DefaultAuxInputs(*c.Depth.IO, *a)
	}
	if c.Depth.IO != nil && c.Depth.IO.Depth.NeedsFocal() {
		for _, cam := range c.cameraSources() {
			if cam.src.Intrinsics == nil && cam.src.IntrinsicsFile == "" {
				add(fmt.Errorf("%s.intrinsics: the depth model %q reads depth for a canonical camera (depth.canonical_focal %g): give the camera's intrinsics or intrinsics_file",
					cam.key, c.Depth.Model, c.Depth.IO.Depth.CanonicalFocal))
			}
		}
	}
	if c.Depth.IO != nil && c.AuxUE.IO != nil {
		if err := infer.CheckPair(*c.Depth.IO, *c.AuxUE.IO, c.AuxUE.Inputs); err != nil {
			add(fmt.Errorf("depth %q and auxue %q do not fit together: %w", c.Depth.Model, c.AuxUE.Model, err))
		}
	}
	if !(c.AuxUE.DepthScale > 0) {
		add(fmt.Errorf("auxue.depth_scale: %g must be positive", c.AuxUE.DepthScale))
	}
	if c.HTTP.Listen != HTTPOff {
		if _, _, err := net.SplitHostPort(c.HTTP.Listen); err != nil {
			add(fmt.Errorf("http.listen: %q is not host:port (or %q): %v", c.HTTP.Listen, HTTPOff, err))
		}
	}
	if err := httpguard.ValidateHosts("http.allowed_hosts", c.HTTP.AllowedHosts); err != nil {
		add(err)
	}
	if !(c.HTTP.MaxFPS > 0) || c.HTTP.MaxFPS > 30 {
		add(fmt.Errorf("http.max_fps: %g must be in (0, 30]", c.HTTP.MaxFPS))
	}
	if c.Pipeline.CameraRestart < time.Second {
		add(fmt.Errorf("pipeline.camera_restart: %v is below 1s", c.Pipeline.CameraRestart))
	} else if c.Pipeline.CameraRestart > time.Hour {
		add(fmt.Errorf("pipeline.camera_restart: %v is above 1h", c.Pipeline.CameraRestart))
	}
	if c.Pipeline.MaxCameras < 1 || c.Pipeline.MaxCameras > 256 {
		add(fmt.Errorf("pipeline.max_cameras: %d is not in 1..256", c.Pipeline.MaxCameras))
	} else if len(c.Cameras) > c.Pipeline.MaxCameras {
		add(fmt.Errorf("cameras: %d cameras, more than pipeline.max_cameras (%d)", len(c.Cameras), c.Pipeline.MaxCameras))
	}
	if c.Pipeline.Tick < 10*time.Millisecond {
		add(fmt.Errorf("pipeline.tick: %v is below 10ms", c.Pipeline.Tick))
	} else if c.Pipeline.Tick > 10*time.Second {
		add(fmt.Errorf("pipeline.tick: %v is above 10s", c.Pipeline.Tick))
	}
	if c.Pipeline.BatchSize < 0 || c.Pipeline.BatchSize > MaxBatchSize {
		add(fmt.Errorf("pipeline.batch_size: %d is not in 0..%d (0: min(cameras, %d) for dynamic-batch models on a GPU provider, else 1)", c.Pipeline.BatchSize, MaxBatchSize, DefaultMaxBatch))
	}
	// record: (issue 20) defaults, paths relative to the file, and the
	// recorder's own validation; errors name record.<key>.
	c.Record = c.Record.WithDefaults()
	c.Record.ResolvePaths(dir)
	add(c.Record.Validate("record"))
	abs(&c.Live.TokenFile)
	add(c.Live.Finish("live"))
	if err := c.parseAlerts(name, dir); err != nil {
		errs = append(errs, err)
	} else if specs, err := c.CameraSpecs(); err != nil {
		errs = append(errs, err)
	} else {
		for _, cs := range specs {
			if _, err := cs.EngineSpec(); err != nil {
				if cs.Key != "camera" || strings.HasPrefix(err.Error(), cs.ZoneKey+".zones") {
					add(err) // the single form's calibration is checked by parseAlerts
				}
			} else {
				check := func(err error) {
					if err != nil && cs.Key != "camera" {
						add(fmt.Errorf("%s: %w", cs.Key, err))
					} else {
						add(err)
					}
				}
				if c.Depth.IO != nil && c.Depth.IO.Relative() {
					check(c.checkRelative(cs.Alerts))
				}
				check(c.checkConfidence(cs.Alerts))
			}
		}
	}
	if len(errs) == 0 {
		add(c.validateOverrides())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
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

func checkFile(key, path string) error {
	return boundedfile.Check(key, path, boundedfile.Model)
}

// resolve checks the model file and loads the IO spec (io, io_spec or
// description) into IO; kind is the model kind the key implies.
func (m *ModelConfig) resolve(key, kind string) error {
	var errs []error
	if m.Model == "" {
		errs = append(errs, fmt.Errorf("%s.model: empty", key))
	} else if err := checkFile(key+".model", m.Model); err != nil {
		errs = append(errs, err)
	}
	file, fileKey := m.IOSpec, "io_spec"
	if m.Description != "" {
		file, fileKey = m.Description, "description"
	}
	given := 0
	for _, set := range []bool{m.IOSpec != "", m.Description != "", m.IO != nil} {
		if set {
			given++
		}
	}
	switch {
	case given > 1:
		errs = append(errs, fmt.Errorf("%s: io, io_spec and description are exclusive", key))
	case file != "":
		data, err := boundedfile.Read(key+"."+fileKey, file, boundedfile.Spec)
		if err != nil {
			errs = append(errs, err)
			break
		}
		spec, err := infer.ParseIOSpecKind(data, file, kind)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.%s: %w", key, fileKey, err))
			break
		}
		m.IO = &spec
	case m.IO != nil:
		if m.IO.Kind == "" {
			m.IO.Kind = kind
		}
		if m.IO.Kind != kind {
			errs = append(errs, fmt.Errorf("%s.io.kind: %q, want %q", key, m.IO.Kind, kind))
		} else if err := m.IO.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s.io.%w", key, err))
		}
	default:
		errs = append(errs, fmt.Errorf("%s: give io (inline IO spec), io_spec or description (file)", key))
	}
	return errors.Join(errs...)
}

// checkRelative refuses the metre-based criteria for a relative depth
// model: its depth has no metres, so the pessimistic depth of a zone means
// nothing. The epistemic and the relative aleatoric criteria stay.
func (c *Config) checkRelative(ac alerts.Config) error {
	cal, err := ac.LoadCalibrationFor()
	if err != nil {
		return nil // reported with the engine spec
	}
	if cal.Levels.PessimisticDepth != nil {
		src := ac.Calibration
		if src == "" {
			src = "the built-in defaults (alerts.calibration empty)"
		}
		return fmt.Errorf("alerts.calibration: levels.pessimistic_depth_m of %s needs depth in metres, but depth %q is relative (depth.meaning %s): "+
			"remove that criterion (ood_fraction and aleatoric_fraction work on relative models; didoedge calibrate writes such a file)",
			src, c.Depth.Model, infer.MeaningRelative)
	}
	return nil
}

// checkConfidence refuses the confidence_fraction criterion for a depth
// model without its own confidence output: the zones would never have a
// confidence value, and the criterion would silently never fire.
func (c *Config) checkConfidence(ac alerts.Config) error {
	if c.Depth.IO == nil || c.Depth.IO.Confidence != nil {
		return nil
	}
	cal, err := ac.LoadCalibrationFor()
	if err != nil || !cal.UsesConfidence() {
		return nil // errors are reported with the engine spec
	}
	src := ac.Calibration
	if src == "" {
		src = "the built-in defaults (alerts.calibration empty)"
	}
	return fmt.Errorf("alerts.calibration: levels.confidence_fraction of %s needs the depth model's own confidence, but depth %q has none: "+
		"add its output to depth.io.confidence ({name: ..., meaning: log_error|relative_error_complement|ranking|spread|validity}) or remove the criterion and tau_c",
		src, c.Depth.Model)
}

// parseAlerts parses the alerts section with package alerts' own strict
// parser and resolves its relative paths against dir.
func (c *Config) parseAlerts(name, dir string) error {
	if c.Alerts.Kind == 0 {
		return errors.New("alerts: missing section")
	}
	data, err := yaml.Marshal(&c.Alerts)
	if err != nil {
		return fmt.Errorf("alerts: %w", err)
	}
	parse := ParseAlerts
	if len(c.Cameras) > 0 {
		parse = ParseSharedAlerts
	}
	ac, err := parse("alerts", data)
	if err != nil {
		return err
	}
	ac.ResolvePaths(dir)
	if _, err := ac.LoadCalibrationFor(); err != nil {
		return fmt.Errorf("alerts.calibration: %w", err)
	}
	var errs []error
	if ac.MQTT.PasswordFile != "" {
		errs = append(errs, checkFile("alerts.mqtt.password_file", ac.MQTT.PasswordFile))
	}
	if t := ac.MQTT.TLS; t != nil {
		for _, f := range []struct{ key, path string }{{"ca", t.CA}, {"cert", t.Cert}, {"key", t.Key}} {
			if f.path != "" {
				errs = append(errs, checkFile("alerts.mqtt.tls."+f.key, f.path))
			}
		}
	}
	for i, u := range ac.Embedded.Users {
		if u.PasswordFile != "" {
			errs = append(errs, checkFile(fmt.Sprintf("alerts.embedded.users[%d].password_file", i), u.PasswordFile))
		}
	}
	if t := ac.Embedded.TLS; t != nil {
		for _, f := range []struct{ key, path string }{{"cert", t.Cert}, {"key", t.Key}, {"client_ca", t.ClientCA}} {
			if f.path != "" {
				errs = append(errs, checkFile("alerts.embedded.tls."+f.key, f.path))
			}
		}
	}
	if parent := filepath.Dir(ac.Outbox.Dir); parent != "" {
		if st, err := os.Stat(parent); err != nil || !st.IsDir() {
			errs = append(errs, fmt.Errorf("alerts.outbox.dir: parent %q is not a directory", parent))
		}
	}
	c.AlertsConfig = ac
	return errors.Join(errs...)
}

// CameraSpecs returns the cameras of the configuration, in order: the
// camera section as one camera named alerts.camera, or the cameras list,
// each with the alerts section's zones and calibration unless it gives
// its own, then the thresholds section and the active profile applied.
func (c *Config) CameraSpecs() ([]CameraSpec, error) { return c.SpecsWithProfile(c.Profile) }

// baseSpecs are the cameras before thresholds and profiles.
func (c *Config) baseSpecs() ([]CameraSpec, error) {
	if len(c.Cameras) == 0 {
		return []CameraSpec{{Name: c.AlertsConfig.Camera, Source: c.Camera, Alerts: c.AlertsConfig.Config, Key: "camera", ZoneKey: "alerts",
			DomainPolicy: c.Domain.Policy}}, nil
	}
	specs := make([]CameraSpec, len(c.Cameras))
	var errs []error
	for i, e := range c.Cameras {
		key := fmt.Sprintf("cameras[%d]", i)
		ac := c.AlertsConfig.Config
		ac.Camera = e.Name
		if e.Calibration != "" {
			ac.Calibration = e.Calibration
		}
		if e.HasZones() {
			ac.ZoneSet = e.ZoneSet
		} else if len(e.Ignore) > 0 {
			ac.Ignore = e.Ignore
		}
		if !ac.HasZones() {
			errs = append(errs, fmt.Errorf("%s.zones: no zones: give the camera zones or grid, or alerts.zones for every camera", key))
		}
		specs[i] = CameraSpec{Name: e.Name, Source: e.CameraConfig, Alerts: ac, Key: key, ZoneKey: key, DomainPolicy: c.Domain.Policy}
	}
	return specs, errors.Join(errs...)
}

// OnlyCamera narrows the configuration to one camera named name: with a
// cameras list, that entry becomes the single camera form (its source,
// and its zones and calibration in the alerts section); a single-camera
// configuration takes name as its camera id. Replays of a recorded camera
// use it, so that the camera is assessed with its own zones and
// calibration. A cameras list without that camera is an error naming the
// file and the cameras it has.
func (c *Config) OnlyCamera(name string) error {
	if len(c.Cameras) == 0 {
		c.AlertsConfig.Camera = name
		return nil
	}
	specs, err := c.CameraSpecs()
	if err != nil {
		return err
	}
	names := make([]string, len(specs))
	for i, cs := range specs {
		if cs.Name == name {
			c.Camera, c.AlertsConfig.Config, c.Cameras = cs.Source, cs.Alerts, nil
			return nil
		}
		names[i] = cs.Name
	}
	return fmt.Errorf("%s: cameras: no camera %q (cameras: %s)", c.Path, name, strings.Join(names, ", "))
}
