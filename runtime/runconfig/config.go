package runconfig

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/didoedge/didoedge/internal/boundedfile"

	"gopkg.in/yaml.v3"

	"github.com/didoedge/didoedge/alerts"
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
	c.HTTP.defaults()
	c.Pipeline.defaults()
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
	errs = append(errs, c.HTTP.validate()...)
	errs = append(errs, c.Pipeline.validate(len(c.Cameras))...)
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
