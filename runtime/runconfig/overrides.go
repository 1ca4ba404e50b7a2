package runconfig

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/didoedge/didoedge/alerts"
)

// Thresholds override the epistemic and aleatoric thresholds of a
// camera's calibration file (a nil or absent value keeps the file's): the
// global tau_e and tau_a, and per zone. The live control API and
// Foxglove's parameters change them at run time; `thresholds:` keeps them
// across restarts.
type Thresholds struct {
	TauE      *float64           `yaml:"tau_e,omitempty" json:"tau_e,omitempty"`
	TauA      *float64           `yaml:"tau_a,omitempty" json:"tau_a,omitempty"`
	TauEZones map[string]float64 `yaml:"tau_e_zones,omitempty" json:"tau_e_zones,omitempty"`
	TauAZones map[string]float64 `yaml:"tau_a_zones,omitempty" json:"tau_a_zones,omitempty"`
}

// IsZero reports whether t overrides nothing.
func (t Thresholds) IsZero() bool {
	return t.TauE == nil && t.TauA == nil && len(t.TauEZones) == 0 && len(t.TauAZones) == 0
}

// Merge returns t with over's values on top.
func (t Thresholds) Merge(over Thresholds) Thresholds {
	out := Thresholds{TauE: t.TauE, TauA: t.TauA, TauEZones: maps.Clone(t.TauEZones), TauAZones: maps.Clone(t.TauAZones)}
	if over.TauE != nil {
		out.TauE = over.TauE
	}
	if over.TauA != nil {
		out.TauA = over.TauA
	}
	for z, v := range over.TauEZones {
		if out.TauEZones == nil {
			out.TauEZones = map[string]float64{}
		}
		out.TauEZones[z] = v
	}
	for z, v := range over.TauAZones {
		if out.TauAZones == nil {
			out.TauAZones = map[string]float64{}
		}
		out.TauAZones[z] = v
	}
	return out
}

// apply overrides cal's thresholds and checks the result: every zone
// named must be one of zones; errors name key (e.g. thresholds.front).
func (t Thresholds) apply(cal *alerts.Calibration, zones []alerts.Zone, key string) error {
	if t.IsZero() {
		return nil
	}
	known := map[string]bool{}
	for _, z := range zones {
		known[z.Name] = true
	}
	if t.TauE != nil {
		cal.TauE = *t.TauE
	}
	if t.TauA != nil {
		cal.TauA = *t.TauA
	}
	for _, m := range []struct {
		key string
		src map[string]float64
		dst *map[string]float64
	}{{"tau_e_zones", t.TauEZones, &cal.TauEZones}, {"tau_a_zones", t.TauAZones, &cal.TauAZones}} {
		if len(m.src) == 0 {
			continue
		}
		*m.dst = maps.Clone(*m.dst)
		if *m.dst == nil {
			*m.dst = map[string]float64{}
		}
		for _, z := range slices.Sorted(maps.Keys(m.src)) {
			if !known[z] {
				return fmt.Errorf("%s.%s.%s: the camera has no zone %q", key, m.key, z, z)
			}
			(*m.dst)[z] = m.src[z]
		}
	}
	if err := cal.Validate(); err != nil {
		return fmt.Errorf("%s.%w", key, err)
	}
	return nil
}

// EventOverrides override keys of alerts.events (nil keeps the value).
type EventOverrides struct {
	FusionTimeConstant *time.Duration `yaml:"fusion_time_constant,omitempty" json:"fusion_time_constant,omitempty"`
	EnterInertia       *time.Duration `yaml:"enter_inertia,omitempty" json:"enter_inertia,omitempty"`
	CriticalEnter      *time.Duration `yaml:"critical_enter_inertia,omitempty" json:"critical_enter_inertia,omitempty"`
	ExitInertia        *time.Duration `yaml:"exit_inertia,omitempty" json:"exit_inertia,omitempty"`
	MinEpisode         *time.Duration `yaml:"min_episode,omitempty" json:"min_episode,omitempty"`
	MergeWindow        *time.Duration `yaml:"merge_window,omitempty" json:"merge_window,omitempty"`
	UpdateInterval     *time.Duration `yaml:"update_interval,omitempty" json:"update_interval,omitempty"`
	CameraStall        *time.Duration `yaml:"camera_stall,omitempty" json:"camera_stall,omitempty"`
}

// Apply sets the overridden keys of e.
func (o EventOverrides) Apply(e *alerts.EventConfig) {
	for _, f := range []struct {
		v   *time.Duration
		dst **time.Duration
	}{{o.FusionTimeConstant, &e.FusionTimeConstant}, {o.EnterInertia, &e.EnterInertia}, {o.CriticalEnter, &e.CriticalEnter},
		{o.ExitInertia, &e.ExitInertia}, {o.MinEpisode, &e.MinEpisode}, {o.MergeWindow, &e.MergeWindow}} {
		if f.v != nil {
			v := *f.v
			*f.dst = &v
		}
	}
	if o.UpdateInterval != nil {
		e.UpdateInterval = *o.UpdateInterval
	}
	if o.CameraStall != nil {
		e.CameraStall = *o.CameraStall
	}
}

// ValidateEvents checks an events section after overrides; errors name key.
func ValidateEvents(e alerts.EventConfig, key string) error {
	return e.ValidateBounds(key) // the one table: alerts.EventBounds
}

// Profile is a named set of overrides, switched at run time (like
// Frigate's profiles): event timings, and per camera zones (replacing
// the camera's) and thresholds (over the camera's).
type Profile struct {
	Events  EventOverrides           `yaml:"events" json:"events"`
	Cameras map[string]ProfileCamera `yaml:"cameras" json:"cameras"`
}

// ProfileCamera is a profile's overrides of one camera.
type ProfileCamera struct {
	// Zones (zones, grid, ignore) replace the camera's when any is given.
	alerts.ZoneSet `yaml:",inline"`
	Thresholds     Thresholds `yaml:"thresholds" json:"thresholds"`
}

var profileNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// validateOverrides checks thresholds:, profiles: and profile: against the
// cameras: every camera named exists, every profile builds every camera's
// engine spec.
func (c *Config) validateOverrides() error {
	specs, err := c.baseSpecs()
	if err != nil {
		return nil // reported by the caller
	}
	names := map[string]bool{}
	for _, cs := range specs {
		names[cs.Name] = true
	}
	var errs []error
	for _, cam := range slices.Sorted(maps.Keys(c.Thresholds)) {
		if !names[cam] {
			errs = append(errs, fmt.Errorf("thresholds.%s: no camera %q", cam, cam))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(c.Profiles)) {
		if !profileNamePattern.MatchString(p) {
			errs = append(errs, fmt.Errorf("profiles.%s: name must match %s", p, profileNamePattern))
			continue
		}
		for _, cam := range slices.Sorted(maps.Keys(c.Profiles[p].Cameras)) {
			if !names[cam] {
				errs = append(errs, fmt.Errorf("profiles.%s.cameras.%s: no camera %q", p, cam, cam))
			}
		}
	}
	if c.Profile != "" {
		if _, ok := c.Profiles[c.Profile]; !ok {
			errs = append(errs, fmt.Errorf("profile: %q is not one of profiles (%v)", c.Profile, slices.Sorted(maps.Keys(c.Profiles))))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// The thresholds section on the file's zones, then every profile, not
	// only the active one: a switch is then refused only for what changed
	// since the file was loaded.
	if base, err := c.SpecsWithProfile(""); err == nil {
		for _, cs := range base {
			if cs.Thresholds.IsZero() {
				continue
			}
			if _, err := cs.EngineSpec(); err != nil && strings.HasPrefix(err.Error(), cs.ThresholdsKey) {
				errs = append(errs, err)
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(c.Profiles)) {
		specs, err := c.SpecsWithProfile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, cs := range specs {
			if _, err := cs.EngineSpec(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// SpecsWithProfile returns the cameras with profile name applied ("" for
// none) instead of the active one.
func (c *Config) SpecsWithProfile(name string) ([]CameraSpec, error) {
	specs, err := c.baseSpecs()
	if err != nil {
		return nil, err
	}
	for i := range specs {
		cs := &specs[i]
		cs.Thresholds = c.Thresholds[cs.Name]
		cs.ThresholdsKey = "thresholds." + cs.Name
	}
	if name == "" {
		return specs, nil
	}
	p, ok := c.Profiles[name]
	if !ok {
		return nil, fmt.Errorf("profile: %q is not one of profiles (%v)", name, slices.Sorted(maps.Keys(c.Profiles)))
	}
	key := "profiles." + name
	ev := c.AlertsConfig.Events
	p.Events.Apply(&ev)
	if err := ValidateEvents(ev, key+".events"); err != nil {
		return nil, err
	}
	for i := range specs {
		cs := &specs[i]
		cs.Alerts.Events = ev
		pc, ok := p.Cameras[cs.Name]
		if !ok {
			continue
		}
		if pc.HasZones() {
			cs.Alerts.ZoneSet = pc.ZoneSet
			cs.ZoneKey = key + ".cameras." + cs.Name
			// Per-zone thresholds of the file's zones do not carry over to
			// the profile's.
			cs.Thresholds.TauEZones, cs.Thresholds.TauAZones = nil, nil
		}
		if !pc.Thresholds.IsZero() {
			cs.Thresholds = cs.Thresholds.Merge(pc.Thresholds)
			cs.ThresholdsKey = key + ".cameras." + cs.Name + ".thresholds"
		}
	}
	return specs, nil
}
