package runconfig

import (
	"errors"
	"fmt"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/mqttpub"
	"github.com/didoedge/didoedge/alerts/snapshot"
	"github.com/didoedge/didoedge/internal/boundedfile"
	"github.com/didoedge/didoedge/internal/yamlstrict"
	"github.com/didoedge/didoedge/runtime/infer"
)

// AlertsConfig is the alerts section of a deployment: the alert domain's
// settings (identity, zones, calibration, event tuning: alerts.Config) and
// its transports' sections, each owned by its package: mqtt, outbox,
// embedded and homeassistant (mqttpub.ServiceConfig), snapshots
// (snapshot.Config). One YAML mapping holds them all.
type AlertsConfig struct {
	alerts.Config         `yaml:",inline"`
	mqttpub.ServiceConfig `yaml:",inline"`
	Snapshots             snapshot.Config `yaml:"snapshots"`
}

// LoadAlerts reads, defaults and validates an alerts section kept in a
// file of its own (`didoedge broker --config`). Relative paths in it are
// made relative to the file's directory.
func LoadAlerts(path string) (AlertsConfig, error) {
	data, err := boundedfile.Read("", path, boundedfile.Config)
	if err != nil {
		return AlertsConfig{}, fmt.Errorf("load alerts config: %w", err)
	}
	c, err := ParseAlerts(path, data)
	if err != nil {
		return AlertsConfig{}, err
	}
	c.ResolvePaths(filepath.Dir(path))
	return c, nil
}

// ParseAlerts parses, defaults and validates the alerts section of a
// single-camera deployment; name labels errors.
func ParseAlerts(name string, data []byte) (AlertsConfig, error) {
	return parseAlerts(name, data, true)
}

// ParseSharedAlerts parses the alerts section of a multi-camera runtime:
// the cameras are named elsewhere (each with its zones or the section's),
// so camera must be absent and zones may be. Everything else is defaulted
// and validated as ParseAlerts does.
func ParseSharedAlerts(name string, data []byte) (AlertsConfig, error) {
	return parseAlerts(name, data, false)
}

func parseAlerts(name string, data []byte, single bool) (AlertsConfig, error) {
	var c AlertsConfig
	if err := yamlstrict.Decode(data, &c); err != nil {
		return AlertsConfig{}, fmt.Errorf("%s: %w", name, err)
	}
	if !single && c.Camera != "" {
		// Before the defaults, so that this is the error a misplaced
		// camera key gets.
		if err := c.Config.ValidateShared(); err != nil {
			return AlertsConfig{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	c.ApplyDefaults()
	if err := c.validate(single); err != nil {
		return AlertsConfig{}, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// ApplyDefaults fills every section's keys left out (the transports'
// read the domain's vehicle and topic prefix). The engines' zone
// statistics follow the publisher's mqtt.stats_interval.
func (c *AlertsConfig) ApplyDefaults() {
	c.Config.ApplyDefaults()
	c.ServiceConfig.ApplyDefaults(c.Vehicle, c.TopicPrefix)
	c.Config.StatsInterval = c.MQTT.StatsInterval
	c.Snapshots.ApplyDefaults()
}

// Validate checks the section of a single-camera deployment; errors name
// the key path within the section.
func (c *AlertsConfig) Validate() error { return c.validate(true) }

func (c *AlertsConfig) validate(single bool) error {
	var err error
	if single {
		err = c.Config.Validate()
	} else {
		err = c.Config.ValidateShared()
	}
	if err != nil {
		return err
	}
	if err := c.ServiceConfig.Validate(c.TopicPrefix); err != nil {
		return err
	}
	if err := c.Snapshots.Validate(); err != nil {
		return fmt.Errorf("snapshots.%w", err)
	}
	return nil
}

// ResolvePaths makes every relative path of the section (calibration,
// MQTT password and TLS files, outbox dir, embedded users' password files
// and TLS files, snapshot dir) relative to dir, the directory of the file
// it was read from.
func (c *AlertsConfig) ResolvePaths(dir string) {
	c.Config.ResolvePaths(dir)
	c.ServiceConfig.ResolvePaths(dir)
	c.Snapshots.ResolvePaths(dir)
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
	// The transports name their files and check their directories.
	var errs []error
	for _, f := range ac.ServiceConfig.Files("alerts.") {
		errs = append(errs, checkFile(f.Key, f.Path))
	}
	errs = append(errs, ac.Outbox.CheckDir("alerts.outbox.dir"))
	c.AlertsConfig = ac
	return errors.Join(errs...)
}
