package runconfig

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"gopkg.in/yaml.v3"
)

// DomainConfig is the domain monitor (the `domain:` section, runtime/domain,
// docs/alerts.md): per camera, each frame's distance to the AuxUE's
// training domain, smoothed over Window and thresholded; above it one
// camera-level domain_shift episode, and after Persistence the camera's
// health degraded.
type DomainConfig struct {
	// Off disables the monitor (it is on whenever the AuxUE's spec has a
	// training-domain record; an AuxUE without one is logged at start).
	Off bool `yaml:"off"`
	// Window: the smoothed distance is the mean over the frames captured
	// in the last Window (default 1s: a sustained change is seen within
	// it).
	Window time.Duration `yaml:"window"`
	// Threshold on the smoothed distance: a number, or "calibrated" (the
	// default): the calibration file's domain_threshold when calibrate set
	// one, else the record's cross-validated in-domain threshold at
	// FalseAlarmRate.
	Threshold DomainThreshold `yaml:"threshold"`
	// FalseAlarmRate of the record's threshold (default 0.01 of in-domain
	// frames; the smoothing lowers the rate of the window's mean further).
	FalseAlarmRate float64 `yaml:"false_alarm_rate"`
	// Persistence: a shift that lasts this long turns the camera degraded
	// (default 2m; 0 never).
	Persistence *time.Duration `yaml:"persistence"`
	// Policy: flag (default: zone episodes opened while shifted carry
	// domain_shift: true) or suppress (no zone episode opens while
	// shifted).
	Policy alerts.DomainPolicy `yaml:"policy"`
}

// DomainThreshold is domain.threshold: a number > 0, or calibrated (zero
// Value).
type DomainThreshold struct {
	Value float64
}

// UnmarshalYAML reads a number or the word calibrated.
func (t *DomainThreshold) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: domain.threshold: want a number or calibrated", n.Line)
	}
	if n.Value == "calibrated" {
		t.Value = 0
		return nil
	}
	v, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return fmt.Errorf("line %d: domain.threshold: %q, want a number > 0 or calibrated", n.Line, n.Value)
	}
	t.Value = v
	return nil
}

// MarshalYAML writes the number or calibrated.
func (t DomainThreshold) MarshalYAML() (any, error) {
	if t.Value == 0 {
		return "calibrated", nil
	}
	return t.Value, nil
}

// Calibrated reports whether the threshold comes from calibration or the record.
func (t DomainThreshold) Calibrated() bool { return t.Value == 0 }

// Domain defaults.
const (
	DefaultDomainWindow      = time.Second
	DefaultDomainFAR         = 0.01
	DefaultDomainPersistence = 2 * time.Minute
)

// defaults fills the unset keys.
func (d *DomainConfig) defaults() {
	if d.Window == 0 {
		d.Window = DefaultDomainWindow
	}
	if d.FalseAlarmRate == 0 {
		d.FalseAlarmRate = DefaultDomainFAR
	}
	if d.Persistence == nil {
		p := DefaultDomainPersistence
		d.Persistence = &p
	}
	if d.Policy == "" {
		d.Policy = alerts.DomainFlag
	}
}

// validate checks the section; errors name the key.
func (d DomainConfig) validate() error {
	switch {
	case d.Window <= 0 || d.Window > 10*time.Minute:
		return fmt.Errorf("domain.window: %v, want (0, 10m]", d.Window)
	case !(d.FalseAlarmRate > 0 && d.FalseAlarmRate < 1):
		return fmt.Errorf("domain.false_alarm_rate: %v, want (0, 1)", d.FalseAlarmRate)
	case d.Persistence != nil && (*d.Persistence < 0 || *d.Persistence > 24*time.Hour):
		return fmt.Errorf("domain.persistence: %v, want [0, 24h]", *d.Persistence)
	}
	return d.Policy.Validate("domain.policy")
}

// PersistenceOrDefault is the persistence in effect.
func (d DomainConfig) PersistenceOrDefault() time.Duration {
	if d.Persistence == nil {
		return DefaultDomainPersistence
	}
	return *d.Persistence
}
