package runtime

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/internal/redact"
	"github.com/didoedge/didoedge/internal/yamlstrict"
	"github.com/didoedge/didoedge/runtime/infer"
)

// Config is the whole runtime configuration: one file embeds the camera,
// inference, alerts and HTTP sections. See configs/vehicle.yaml and
// docs/runtime.md for every key.
type Config struct {
	Camera    CameraConfig   `yaml:"camera"`
	Inference infer.Config   `yaml:"inference"`
	Depth     ModelConfig    `yaml:"depth"`
	AuxUE     AuxUEConfig    `yaml:"auxue"`
	Alerts    yaml.Node      `yaml:"alerts"` // an alerts.Config; parsed into AlertsConfig
	HTTP      HTTPConfig     `yaml:"http"`
	Pipeline  PipelineConfig `yaml:"pipeline"`

	// AlertsConfig is the parsed alerts section, with relative paths
	// resolved against the config file's directory.
	AlertsConfig alerts.Config `yaml:"-"`
	// Path is the file Load read ("" when parsed from memory); SIGHUP
	// re-reads it.
	Path string `yaml:"-"`
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
}

// SequenceConfig is an image-sequence source.
type SequenceConfig struct {
	Dir  string  `yaml:"dir"`
	FPS  float64 `yaml:"fps"` // 0: as fast as the pipeline consumes
	Loop bool    `yaml:"loop"`
}

// ModelConfig names an ONNX model and its IO spec, given either inline
// (io) or as a file (io_spec), in runtime/infer's format.
type ModelConfig struct {
	Model  string        `yaml:"model"`
	IOSpec string        `yaml:"io_spec"`
	IO     *infer.IOSpec `yaml:"io"`
}

// AuxUEConfig is the AuxUE model. Its IO spec uses runtime/infer's format
// with the Laplace scale output in the depth slot (depth.name, meaning
// metric_depth: b in metres) and the epistemic output K/S as the first
// feature. Inputs lists what is concatenated, channel after channel, into
// the AuxUE input: "image" (the depth model's normalized input), "depth"
// (the predicted depth in metres times depth_scale), or the name of a
// depth-model feature output.
//
// Instead of io or io_spec, description may name the file `didoedge train
// auxue` writes beside auxue.onnx (input name and shape, outputs with their
// meanings); see ParseAuxUEDescription.
type AuxUEConfig struct {
	ModelConfig `yaml:",inline"`
	Description string   `yaml:"description"`
	Inputs      []string `yaml:"inputs"`
	DepthScale  float32  `yaml:"depth_scale"` // 0 means 1
}

// HTTPConfig is the debug page, /metrics, /healthz and /readyz.
type HTTPConfig struct {
	// Listen is the bind address (default 127.0.0.1:8080); "off" disables.
	Listen string `yaml:"listen"`
	// MaxFPS bounds how often maps are copied for the page (default 4).
	MaxFPS float64 `yaml:"max_fps"`
}

// PipelineConfig tunes the frame loop.
type PipelineConfig struct {
	// Tick is how often stall detection and stats run (default 250ms).
	Tick time.Duration `yaml:"tick"`
}

// Input sources of the AuxUE besides depth-model feature names.
const (
	InputImage = "image"
	InputDepth = "depth"
)

// HTTPOff disables the HTTP server.
const HTTPOff = "off"

// Load reads and validates a config file; relative paths in it are
// relative to the file's directory.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
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
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	abs(&c.Depth.Model)
	abs(&c.Depth.IOSpec)
	abs(&c.AuxUE.Model)
	abs(&c.AuxUE.IOSpec)
	abs(&c.AuxUE.Description)
	if c.Camera.Sequence != nil {
		abs(&c.Camera.Sequence.Dir)
	}
	if c.Inference.Library != "" {
		abs(&c.Inference.Library)
	}
	if c.HTTP.Listen == "" {
		c.HTTP.Listen = "127.0.0.1:8080"
	}
	if c.HTTP.MaxFPS == 0 {
		c.HTTP.MaxFPS = 4
	}
	if c.Pipeline.Tick == 0 {
		c.Pipeline.Tick = 250 * time.Millisecond
	}
	if c.AuxUE.DepthScale == 0 {
		c.AuxUE.DepthScale = 1
	}

	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(c.Camera.validate())
	if err := c.Inference.Validate(); err != nil {
		add(fmt.Errorf("inference.%w", err))
	}
	if c.Inference.Library != "" {
		add(checkFile("inference.library", c.Inference.Library))
	}
	add(c.Depth.resolve("depth"))
	add(c.AuxUE.resolveAuxUE())
	if len(c.AuxUE.Inputs) == 0 {
		// The depth model's first extra output, made for the AuxUE, or
		// else the image and the depth.
		c.AuxUE.Inputs = []string{InputImage, InputDepth}
		if c.Depth.IO != nil && len(c.Depth.IO.Features) > 0 {
			c.AuxUE.Inputs = []string{c.Depth.IO.Features[0].Name}
		}
	}
	if c.Depth.IO != nil {
		add(c.AuxUE.validateInputs(*c.Depth.IO))
	}
	if !(c.AuxUE.DepthScale > 0) {
		add(fmt.Errorf("auxue.depth_scale: %g must be positive", c.AuxUE.DepthScale))
	}
	if c.HTTP.Listen != HTTPOff {
		if _, _, err := net.SplitHostPort(c.HTTP.Listen); err != nil {
			add(fmt.Errorf("http.listen: %q is not host:port (or %q): %v", c.HTTP.Listen, HTTPOff, err))
		}
	}
	if !(c.HTTP.MaxFPS > 0) || c.HTTP.MaxFPS > 30 {
		add(fmt.Errorf("http.max_fps: %g must be in (0, 30]", c.HTTP.MaxFPS))
	}
	if c.Pipeline.Tick < 10*time.Millisecond {
		add(fmt.Errorf("pipeline.tick: %v is below 10ms", c.Pipeline.Tick))
	}
	if err := c.parseAlerts(name, dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (c *CameraConfig) validate() error {
	switch {
	case c.URL == "" && c.Sequence == nil:
		return errors.New("camera: give url (RTSP) or sequence (image directory)")
	case c.URL != "" && c.Sequence != nil:
		return errors.New("camera: url and sequence are exclusive")
	case c.URL != "":
		if !strings.HasPrefix(c.URL, "rtsp://") && !strings.HasPrefix(c.URL, "rtsps://") {
			return fmt.Errorf("camera.url: %q must start with rtsp:// or rtsps://", redact.URL(c.URL))
		}
		if err := camera.ValidateRTSPURL(c.URL); err != nil {
			return fmt.Errorf("camera.url: %w", err)
		}
	default:
		if c.Sequence.Dir == "" {
			return errors.New("camera.sequence.dir: empty")
		}
		if st, err := os.Stat(c.Sequence.Dir); err != nil || !st.IsDir() {
			return fmt.Errorf("camera.sequence.dir: %q is not a directory", c.Sequence.Dir)
		}
		if c.Sequence.FPS < 0 {
			return fmt.Errorf("camera.sequence.fps: %g is negative", c.Sequence.FPS)
		}
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"stall_timeout", c.StallTimeout}, {"backoff_min", c.BackoffMin}, {"backoff_max", c.BackoffMax}, {"request_timeout", c.RequestTimeout}} {
		if d.v < 0 {
			return fmt.Errorf("camera.%s: %v is negative", d.key, d.v)
		}
	}
	return nil
}

func checkFile(key, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: %q is not a regular file", key, path)
	}
	return nil
}

// resolve checks the model file and loads the IO spec file into IO.
func (m *ModelConfig) resolve(key string) error {
	var errs []error
	if m.Model == "" {
		errs = append(errs, fmt.Errorf("%s.model: empty", key))
	} else if err := checkFile(key+".model", m.Model); err != nil {
		errs = append(errs, err)
	}
	switch {
	case m.IOSpec != "" && m.IO != nil:
		errs = append(errs, fmt.Errorf("%s: io_spec and io are exclusive", key))
	case m.IOSpec != "":
		data, err := os.ReadFile(m.IOSpec)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.io_spec: %w", key, err))
			break
		}
		spec, err := infer.ParseIOSpec(data, m.IOSpec)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.io_spec: %w", key, err))
			break
		}
		m.IO = &spec
	case m.IO != nil:
		if err := m.IO.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s.io.%w", key, err))
		}
	default:
		errs = append(errs, fmt.Errorf("%s: give io (inline IO spec) or io_spec (file)", key))
	}
	return errors.Join(errs...)
}

// resolveAuxUE loads the IO spec from io, io_spec or description.
func (a *AuxUEConfig) resolveAuxUE() error {
	if a.Description == "" {
		return a.resolve("auxue")
	}
	if a.IOSpec != "" || a.IO != nil {
		return errors.New("auxue: description, io_spec and io are exclusive")
	}
	var errs []error
	if a.Model == "" {
		errs = append(errs, errors.New("auxue.model: empty"))
	} else if err := checkFile("auxue.model", a.Model); err != nil {
		errs = append(errs, err)
	}
	data, err := os.ReadFile(a.Description)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("auxue.description: %w", err))...)
	}
	spec, err := ParseAuxUEDescription(data, a.Description)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("auxue.description: %w", err))...)
	}
	if len(errs) == 0 {
		if err := CheckAuxUEModel(data, a.Description, a.Model); err != nil {
			errs = append(errs, fmt.Errorf("auxue.description: %w", err))
		}
	}
	a.IO = &spec
	return errors.Join(errs...)
}

func (a *AuxUEConfig) validateInputs(depth infer.IOSpec) error {
	known := map[string]bool{InputImage: true, InputDepth: true}
	for _, f := range depth.Features {
		known[f.Name] = true
	}
	for i, in := range a.Inputs {
		if !known[in] {
			names := []string{InputImage, InputDepth}
			for _, f := range depth.Features {
				names = append(names, f.Name)
			}
			return fmt.Errorf("auxue.inputs[%d]: %q is not one of %s", i, in, strings.Join(names, ", "))
		}
	}
	if a.IO != nil && len(a.IO.Features) == 0 {
		return errors.New("auxue.io.features: empty: the first feature must name the epistemic output (K/S)")
	}
	return nil
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
	ac, err := alerts.ParseConfig("alerts", data)
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

// ReloadAlerts re-reads the config file and returns its alerts section
// (zones and calibration are what a SIGHUP changes).
func (c *Config) ReloadAlerts() (alerts.Config, error) {
	if c.Path == "" {
		return alerts.Config{}, errors.New("reload: the configuration was not read from a file (built-in defaults): nothing to reload")
	}
	fresh, err := Load(c.Path)
	if err != nil {
		return alerts.Config{}, err
	}
	return fresh.AlertsConfig, nil
}
