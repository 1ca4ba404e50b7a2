package runconfig

import (
	"errors"
	"fmt"
	"strings"

	"github.com/didoedge/didoedge/alerts"
)

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
