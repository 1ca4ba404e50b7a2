package alerts

import (
	"fmt"
	"path/filepath"
	"regexp"
	"time"
)

// Config is the alerts domain's part of a deployment's alerts section:
// identity, zones, calibration and event tuning. The transports' sections
// (mqtt, outbox, embedded, homeassistant, snapshots) belong to their
// packages; the deployment config (runtime/runconfig) reads them all.
type Config struct {
	Vehicle     string `yaml:"vehicle"`
	Camera      string `yaml:"camera"`
	TopicPrefix string `yaml:"topic_prefix"`
	// Calibration is the path of the calibration file, relative to the
	// config file; empty means DefaultCalibration.
	Calibration string `yaml:"calibration"`

	ZoneSet `yaml:",inline"`

	Events EventConfig `yaml:"events"`

	// StatsInterval is how often the engines emit zone statistics: the
	// publisher's mqtt.stats_interval, set by the deployment config
	// (default 5s).
	StatsInterval time.Duration `yaml:"-"`
}

// EventConfig tunes fusion, levels and events (see Timing and
// EngineConfig). The Timing durations are pointers so that an explicit 0
// (off) differs from an absent key (the default).
type EventConfig struct {
	FusionTimeConstant *time.Duration `yaml:"fusion_time_constant"`
	EnterInertia       *time.Duration `yaml:"enter_inertia"`
	CriticalEnter      *time.Duration `yaml:"critical_enter_inertia"` // Timing.CriticalEnterInertia
	ExitInertia        *time.Duration `yaml:"exit_inertia"`
	MinEpisode         *time.Duration `yaml:"min_episode"`
	MergeWindow        *time.Duration `yaml:"merge_window"`
	UpdateInterval     time.Duration  `yaml:"update_interval"`
	CameraStall        time.Duration  `yaml:"camera_stall"`

	// Keys of earlier versions, kept only to name their replacement.
	InertiaFrames any `yaml:"inertia_frames"`
	MinHold       any `yaml:"min_hold"`
}

// Default event timing, chosen with `didoedge bench scenario` (docs/alerts.md).
const (
	DefaultFusionTimeConstant = 50 * time.Millisecond
	DefaultEnterInertia       = 300 * time.Millisecond
	DefaultCriticalEnter      = 70 * time.Millisecond
	DefaultExitInertia        = 200 * time.Millisecond
	DefaultMinEpisode         = time.Second
	DefaultMergeWindow        = time.Second
)

// DefaultTiming is the fusion and hysteresis of a config that sets none.
func DefaultTiming() Timing {
	return Timing{FusionTimeConstant: DefaultFusionTimeConstant, EnterInertia: DefaultEnterInertia, CriticalEnterInertia: DefaultCriticalEnter,
		ExitInertia: DefaultExitInertia, MinEpisode: DefaultMinEpisode, MergeWindow: DefaultMergeWindow}
}

// Timing returns the fusion and hysteresis durations, defaults for keys not given.
func (e EventConfig) Timing() Timing {
	t := DefaultTiming()
	for _, f := range []struct {
		v   *time.Duration
		dst *time.Duration
	}{{e.FusionTimeConstant, &t.FusionTimeConstant}, {e.EnterInertia, &t.EnterInertia},
		{e.CriticalEnter, &t.CriticalEnterInertia}, {e.ExitInertia, &t.ExitInertia},
		{e.MinEpisode, &t.MinEpisode}, {e.MergeWindow, &t.MergeWindow}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	return t
}

// SetTiming sets every Timing duration of the config.
func (e *EventConfig) SetTiming(t Timing) {
	d := func(v time.Duration) *time.Duration { return &v }
	e.FusionTimeConstant, e.EnterInertia, e.ExitInertia = d(t.FusionTimeConstant), d(t.EnterInertia), d(t.ExitInertia)
	e.CriticalEnter = d(t.CriticalEnterInertia)
	e.MinEpisode, e.MergeWindow = d(t.MinEpisode), d(t.MergeWindow)
}

var (
	vehiclePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	prefixPattern  = regexp.MustCompile(`^[A-Za-z0-9_-]+(/[A-Za-z0-9_-]+)*$`)
)

// HasZones reports whether the set names any zone (zones or grid).
func (zs ZoneSet) HasZones() bool { return len(zs.Zones) > 0 || zs.Grid != nil }

// ValidCamera checks a camera id (a topic level and part of episode ids).
func ValidCamera(id string) error {
	if !cameraPattern.MatchString(id) {
		return fmt.Errorf("%q must match %s", id, cameraPattern)
	}
	return nil
}

// ApplyDefaults fills the keys left out: topic prefix "didoedge", the
// default event timing, a 2 s camera stall, 5 s statistics.
func (c *Config) ApplyDefaults() {
	if c.TopicPrefix == "" {
		c.TopicPrefix = "didoedge"
	}
	e := &c.Events
	e.SetTiming(e.Timing())
	if e.CameraStall == 0 {
		e.CameraStall = 2 * time.Second
	}
	if c.StatsInterval == 0 {
		c.StatsInterval = 5 * time.Second
	}
}

// Validate checks the config of one camera; errors name the key path.
func (c *Config) Validate() error { return c.validate(true) }

// ValidateShared checks the shared alerts section of a multi-camera
// runtime: the cameras are named elsewhere (each with its zones or the
// section's), so camera must be absent and zones may be.
func (c *Config) ValidateShared() error {
	if c.Camera != "" {
		return fmt.Errorf("camera: %q: with a cameras list each camera is named by its own name key; leave camera out", c.Camera)
	}
	return c.validate(false)
}

// validate checks the config; single is false for the shared section of a
// multi-camera runtime (no camera id, zones optional).
func (c *Config) validate(single bool) error {
	if !vehiclePattern.MatchString(c.Vehicle) {
		return fmt.Errorf("vehicle: %q must match %s", c.Vehicle, vehiclePattern)
	}
	if single && !cameraPattern.MatchString(c.Camera) {
		return fmt.Errorf("camera: %q must match %s", c.Camera, cameraPattern)
	}
	if !prefixPattern.MatchString(c.TopicPrefix) {
		return fmt.Errorf("topic_prefix: %q must match %s (no wildcards)", c.TopicPrefix, prefixPattern)
	}
	if single || c.ZoneSet.HasZones() || len(c.ZoneSet.Ignore) > 0 {
		if err := c.ZoneSet.Validate(""); err != nil {
			return err
		}
	}
	e := c.Events
	if e.InertiaFrames != nil {
		return fmt.Errorf("events.inertia_frames: removed: levels now follow time, not frame counts; use events.enter_inertia " +
			"(how long the fused signals must ask for a higher level, e.g. 2 frames at 15 fps = 133ms) and events.exit_inertia")
	}
	if e.MinHold != nil {
		return fmt.Errorf("events.min_hold: removed: use events.min_episode (an episode is not ended before it lasted this long) " +
			"and events.exit_inertia (how long the fused signals must ask for a lower level)")
	}
	return e.ValidateBounds("events") // bounds.go
}

// ResolvePaths makes a relative calibration path relative to dir, the
// directory of the file it was read from.
func (c *Config) ResolvePaths(dir string) {
	if c.Calibration != "" && !filepath.IsAbs(c.Calibration) {
		c.Calibration = filepath.Join(dir, c.Calibration)
	}
}

// LoadCalibrationFor returns the calibration the config names, or the
// defaults when it names none.
func (c *Config) LoadCalibrationFor() (Calibration, error) {
	if c.Calibration == "" {
		return DefaultCalibration(), nil
	}
	return LoadCalibration(c.Calibration)
}

// EngineConfig derives the engine's configuration.
func (c *Config) EngineConfig() EngineConfig {
	return EngineConfig{Vehicle: c.Vehicle, Camera: c.Camera, Timing: c.Events.Timing(),
		UpdateInterval: c.Events.UpdateInterval, StallAfter: c.Events.CameraStall, StatsInterval: c.StatsInterval}
}

// EngineSpec loads the calibration and resolves the zones: everything an
// Engine is built from. key prefixes zone errors (e.g. "alerts" when the
// config is embedded under that key).
func (c *Config) EngineSpec(key string) (EngineSpec, error) {
	cal, err := c.LoadCalibrationFor()
	if err != nil {
		return EngineSpec{}, err
	}
	zones, ignore, err := c.ZoneSet.Resolve(key)
	if err != nil {
		if key == "" {
			err = fmt.Errorf("alerts config: %w", err)
		}
		return EngineSpec{}, err
	}
	return EngineSpec{Config: c.EngineConfig(), Zones: zones, Ignore: ignore, Calibration: cal}, nil
}

// Topics returns the topic builder of the config.
func (c *Config) Topics() Topics { return Topics{Prefix: c.TopicPrefix, Vehicle: c.Vehicle} }
