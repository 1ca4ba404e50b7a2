package alerts

import (
	"fmt"
	"io"
	"math"
	"os"

	"github.com/didoedge/didoedge/internal/boundedfile"

	"github.com/didoedge/didoedge/internal/yamlstrict"
	"gopkg.in/yaml.v3"
)

// CalibrationVersion is the calibration file format this package reads and
// writes. A file with another version is rejected.
const CalibrationVersion = 1

// Calibration holds the thresholds the risk assessment uses. It is a YAML
// (or JSON, which YAML parses) file that `didoedge calibrate` writes; see
// docs/alerts.md for the format.
type Calibration struct {
	// Version must equal CalibrationVersion.
	Version int `yaml:"version" json:"version"`
	// TauE is the global threshold on the DIDO epistemic map K/S in (0,1]:
	// a pixel with K/S > TauE counts as out of distribution.
	TauE float64 `yaml:"tau_e" json:"tau_e"`
	// TauEZones overrides TauE per zone name.
	TauEZones map[string]float64 `yaml:"tau_e_zones,omitempty" json:"tau_e_zones,omitempty"`
	// TauA is the threshold on the relative Laplace scale b/depth (after
	// ScaleCorrection): a pixel with b/depth > TauA counts as unreliable.
	TauA float64 `yaml:"tau_a" json:"tau_a"`
	// TauAZones overrides TauA per zone name.
	TauAZones map[string]float64 `yaml:"tau_a_zones,omitempty" json:"tau_a_zones,omitempty"`
	// ScaleCorrection multiplies every Laplace scale b before use, so that
	// the interval depth +- b ln(1/(1-Coverage)) covers Coverage of the
	// errors on calibration data.
	ScaleCorrection float64 `yaml:"scale_correction" json:"scale_correction"`
	// Coverage of the Laplace interval whose lower end is the pessimistic
	// nearest depth, in (0,1).
	Coverage float64 `yaml:"coverage" json:"coverage"`
	// Levels are the warn and critical thresholds per criterion.
	Levels LevelThresholds `yaml:"levels" json:"levels"`
	// DomainThreshold is the domain monitor's threshold on the smoothed
	// distance to the training domain (package runtime/domain), set by
	// calibrate at the target false-alarm rate on in-domain frames; 0: not
	// calibrated (the runtime's domain.threshold: calibrated then takes the
	// AuxUE record's cross-validated threshold).
	DomainThreshold float64 `yaml:"domain_threshold,omitempty" json:"domain_threshold,omitempty"`
	// Meta is free-form provenance (data set, date, command).
	Meta map[string]string `yaml:"meta,omitempty" json:"meta,omitempty"`
}

// LevelThresholds lists the criteria. A nil criterion is not used.
type LevelThresholds struct {
	// OODFraction: fraction of zone pixels with K/S > tau_e (higher is worse).
	OODFraction *Criterion `yaml:"ood_fraction,omitempty" json:"ood_fraction,omitempty"`
	// AleatoricFraction: fraction of zone pixels with b/depth > tau_a (higher is worse).
	AleatoricFraction *Criterion `yaml:"aleatoric_fraction,omitempty" json:"aleatoric_fraction,omitempty"`
	// PessimisticDepth: pessimistic nearest depth in metres (lower is worse).
	PessimisticDepth *Criterion `yaml:"pessimistic_depth_m,omitempty" json:"pessimistic_depth_m,omitempty"`
}

// Criterion holds the enter and exit thresholds of the two raised levels.
type Criterion struct {
	Warn     Hysteresis `yaml:"warn" json:"warn"`
	Critical Hysteresis `yaml:"critical" json:"critical"`
}

// Hysteresis: a level is entered when the value crosses Enter and left
// when it crosses back over Exit. For fractions Exit <= Enter; for the
// depth criterion Exit >= Enter.
type Hysteresis struct {
	Enter float64 `yaml:"enter" json:"enter"`
	Exit  float64 `yaml:"exit" json:"exit"`
}

// DefaultCalibration returns thresholds for an uncalibrated system. They
// are conservative starting points, not calibrated values.
func DefaultCalibration() Calibration {
	return Calibration{
		Version:         CalibrationVersion,
		TauE:            0.5,
		TauA:            0.2,
		ScaleCorrection: 1,
		Coverage:        0.9,
		Levels: LevelThresholds{
			OODFraction:       &Criterion{Warn: Hysteresis{0.05, 0.03}, Critical: Hysteresis{0.20, 0.12}},
			AleatoricFraction: &Criterion{Warn: Hysteresis{0.15, 0.10}, Critical: Hysteresis{0.40, 0.30}},
			PessimisticDepth:  &Criterion{Warn: Hysteresis{8, 10}, Critical: Hysteresis{4, 5}},
		},
	}
}

// LoadCalibration reads a calibration file.
func LoadCalibration(path string) (Calibration, error) {
	data, err := boundedfile.Read("", path, boundedfile.Calibration)
	if err != nil {
		return Calibration{}, fmt.Errorf("load calibration: %w", err)
	}
	// A calibration file is named by a key, which a control request may
	// set: its parse errors never quote it (it may be any readable file).
	return parseCalibration(path, data, yamlstrict.DecodeRedacted)
}

// ParseCalibration parses and validates calibration data; name labels errors.
func ParseCalibration(name string, data []byte) (Calibration, error) {
	return parseCalibration(name, data, yamlstrict.Decode)
}

func parseCalibration(name string, data []byte, decode func([]byte, any) error) (Calibration, error) {
	var c Calibration
	if err := decode(data, &c); err != nil {
		return Calibration{}, fmt.Errorf("%s: %w", name, err)
	}
	if err := c.Validate(); err != nil {
		return Calibration{}, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// WriteCalibration writes c as YAML after validating it.
func WriteCalibration(w io.Writer, c Calibration) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("write calibration: %w", err)
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return fmt.Errorf("write calibration: %w", err)
	}
	return enc.Close()
}

// SaveCalibration writes c to the file path (WriteCalibration).
func SaveCalibration(path string, c Calibration) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write calibration: %w", err)
	}
	if err := WriteCalibration(f, c); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write calibration %s: %w", path, err)
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Validate checks ranges and the ordering of thresholds.
func (c Calibration) Validate() error {
	if c.Version != CalibrationVersion {
		return fmt.Errorf("version: %d, want %d", c.Version, CalibrationVersion)
	}
	if !finite(c.TauE) || c.TauE <= 0 || c.TauE > 1 {
		return fmt.Errorf("tau_e: %v outside (0,1]", c.TauE)
	}
	for z, v := range c.TauEZones {
		if !zoneNamePattern.MatchString(z) {
			return fmt.Errorf("tau_e_zones.%s: not a valid zone name", z)
		}
		if !finite(v) || v <= 0 || v > 1 {
			return fmt.Errorf("tau_e_zones.%s: %v outside (0,1]", z, v)
		}
	}
	if !finite(c.TauA) || c.TauA <= 0 {
		return fmt.Errorf("tau_a: %v must be > 0", c.TauA)
	}
	for z, v := range c.TauAZones {
		if !zoneNamePattern.MatchString(z) {
			return fmt.Errorf("tau_a_zones.%s: not a valid zone name", z)
		}
		if !finite(v) || v <= 0 {
			return fmt.Errorf("tau_a_zones.%s: %v must be > 0", z, v)
		}
	}
	if !finite(c.ScaleCorrection) || c.ScaleCorrection <= 0 {
		return fmt.Errorf("scale_correction: %v must be > 0", c.ScaleCorrection)
	}
	if !finite(c.DomainThreshold) || c.DomainThreshold < 0 {
		return fmt.Errorf("domain_threshold: %v must be >= 0 (0: not calibrated)", c.DomainThreshold)
	}
	if !finite(c.Coverage) || c.Coverage <= 0 || c.Coverage >= 1 {
		return fmt.Errorf("coverage: %v outside (0,1)", c.Coverage)
	}
	l := c.Levels
	if l.OODFraction == nil && l.AleatoricFraction == nil && l.PessimisticDepth == nil {
		return fmt.Errorf("levels: no criterion given")
	}
	if err := l.OODFraction.validate("levels.ood_fraction", true, 1); err != nil {
		return err
	}
	if err := l.AleatoricFraction.validate("levels.aleatoric_fraction", true, 1); err != nil {
		return err
	}
	return l.PessimisticDepth.validate("levels.pessimistic_depth_m", false, math.Inf(1))
}

// validate checks one criterion; higherWorse tells the direction.
func (c *Criterion) validate(p string, higherWorse bool, max float64) error {
	if c == nil {
		return nil
	}
	for _, h := range []struct {
		name string
		v    Hysteresis
	}{{"warn", c.Warn}, {"critical", c.Critical}} {
		for _, x := range []struct {
			key string
			v   float64
		}{{"enter", h.v.Enter}, {"exit", h.v.Exit}} {
			if !finite(x.v) || x.v < 0 || x.v > max {
				return fmt.Errorf("%s.%s.%s: %v outside [0,%v]", p, h.name, x.key, x.v, max)
			}
		}
		if higherWorse && h.v.Exit > h.v.Enter {
			return fmt.Errorf("%s.%s.exit: %v above enter %v (hysteresis needs exit <= enter)", p, h.name, h.v.Exit, h.v.Enter)
		}
		if !higherWorse && h.v.Exit < h.v.Enter {
			return fmt.Errorf("%s.%s.exit: %v below enter %v (hysteresis needs exit >= enter)", p, h.name, h.v.Exit, h.v.Enter)
		}
	}
	if higherWorse && c.Critical.Enter < c.Warn.Enter {
		return fmt.Errorf("%s.critical.enter: %v below warn.enter %v", p, c.Critical.Enter, c.Warn.Enter)
	}
	if !higherWorse && c.Critical.Enter > c.Warn.Enter {
		return fmt.Errorf("%s.critical.enter: %v above warn.enter %v", p, c.Critical.Enter, c.Warn.Enter)
	}
	return nil
}

// tauEFor returns the epistemic threshold of a zone.
func (c Calibration) tauEFor(zone string) float64 {
	if v, ok := c.TauEZones[zone]; ok {
		return v
	}
	return c.TauE
}

// TauEFor returns the K/S threshold of a zone: its tau_e_zones entry, else tau_e.
func (c Calibration) TauEFor(zone string) float64 { return c.tauEFor(zone) }

// TauAFor returns the b/depth threshold of a zone: its tau_a_zones entry, else tau_a.
func (c Calibration) TauAFor(zone string) float64 {
	if v, ok := c.TauAZones[zone]; ok {
		return v
	}
	return c.TauA
}
