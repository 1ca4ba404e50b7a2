package control

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// Parameter is a Foxglove parameter (getParameters, setParameters,
// parameterValues).
type Parameter struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
	Type  string `json:"type,omitempty"`
}

// Parameters, all float64:
//
//	/<camera>/tau_e                K/S threshold of the camera's zones without their own
//	/<camera>/tau_a                b/depth threshold, likewise
//	/<camera>/zones/<zone>/tau_e   the zone's K/S threshold (tau_e_zones)
//	/<camera>/zones/<zone>/tau_a   the zone's b/depth threshold (tau_a_zones)
//	/events/<key>                  alerts.events timings, seconds
var eventKeys = []string{"fusion_time_constant", "enter_inertia", "critical_enter_inertia", "exit_inertia", "min_episode",
	"merge_window", "update_interval", "camera_stall"}

// eventField returns the override pointer of an events key.
func eventField(o *runconfig.EventOverrides, key string) **time.Duration {
	switch key {
	case "fusion_time_constant":
		return &o.FusionTimeConstant
	case "enter_inertia":
		return &o.EnterInertia
	case "critical_enter_inertia":
		return &o.CriticalEnter
	case "exit_inertia":
		return &o.ExitInertia
	case "min_episode":
		return &o.MinEpisode
	case "merge_window":
		return &o.MergeWindow
	case "update_interval":
		return &o.UpdateInterval
	case "camera_stall":
		return &o.CameraStall
	}
	return nil
}

// eventValue reads an events key of an events section.
func eventValue(e alerts.EventConfig, key string) time.Duration {
	t := e.Timing()
	switch key {
	case "fusion_time_constant":
		return t.FusionTimeConstant
	case "enter_inertia":
		return t.EnterInertia
	case "critical_enter_inertia":
		return t.CriticalEnterInertia
	case "exit_inertia":
		return t.ExitInertia
	case "min_episode":
		return t.MinEpisode
	case "merge_window":
		return t.MergeWindow
	case "update_interval":
		return e.UpdateInterval
	case "camera_stall":
		return e.CameraStall
	}
	return 0
}

func f64(name string, v float64) Parameter { return Parameter{Name: name, Value: v, Type: "float64"} }

// GetParameters returns the named parameters in force (every parameter
// when names is empty); unknown names are left out.
func (c *Control) GetParameters(names []string) ([]Parameter, error) {
	cfg := c.Config()
	specs, err := cfg.CameraSpecs()
	if err != nil {
		return nil, err
	}
	var all []Parameter
	for _, cs := range specs {
		es, err := cs.EngineSpec()
		if err != nil {
			return nil, err
		}
		cal := es.Calibration
		all = append(all, f64("/"+cs.Name+"/tau_e", cal.TauE), f64("/"+cs.Name+"/tau_a", cal.TauA))
		for _, z := range es.Zones {
			all = append(all, f64("/"+cs.Name+"/zones/"+z.Name+"/tau_e", cal.TauEFor(z.Name)),
				f64("/"+cs.Name+"/zones/"+z.Name+"/tau_a", cal.TauAFor(z.Name)))
		}
	}
	ev := cfg.AlertsConfig.Events
	if len(specs) > 0 {
		ev = specs[0].Alerts.Events // with the active profile's
	}
	for _, k := range eventKeys {
		all = append(all, f64("/events/"+k, eventValue(ev, k).Seconds()))
	}
	if len(names) == 0 {
		return all, nil
	}
	var out []Parameter
	for _, p := range all {
		if slices.Contains(names, p.Name) {
			out = append(out, p)
		}
	}
	return out, nil
}

// SetParameters applies Foxglove's setParameters: every parameter or none
// (in memory; the HTTP API's PUT /api/parameters?persist=1 writes the
// file). It returns the values in force afterwards.
func (c *Control) SetParameters(ctx context.Context, ps []Parameter, who string) ([]Parameter, error) {
	return c.setParameters(ctx, ps, false, who)
}

func (c *Control) setParameters(ctx context.Context, ps []Parameter, persist bool, who string) ([]Parameter, error) {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	type persisted struct {
		path []any
		v    any
	}
	var writes []persisted
	edit := func(cfg *runconfig.Config) error {
		writes = writes[:0]
		ev := cfg.AlertsConfig.Config.Events
		var evo runconfig.EventOverrides
		evChanged := false
		for _, p := range ps {
			v, ok := p.Value.(float64)
			if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
				return refuse(http.StatusBadRequest, "%s: %v is not a number", p.Name, p.Value)
			}
			parts := strings.Split(strings.TrimPrefix(p.Name, "/"), "/")
			switch {
			case len(parts) == 2 && parts[0] == "events" && slices.Contains(eventKeys, parts[1]):
				if pr, ok := cfg.Profiles[cfg.Profile]; ok && *eventField(&pr.Events, parts[1]) != nil {
					return refuse(http.StatusConflict, "%s: profile %q sets events.%s; switch the profile off or edit profiles.%s.events",
						p.Name, cfg.Profile, parts[1], cfg.Profile)
				}
				b, _ := alerts.EventBoundOf(parts[1])
				d, err := b.Seconds("alerts.events."+parts[1], v)
				if err != nil {
					return refuse(http.StatusUnprocessableEntity, "%w", err)
				}
				*eventField(&evo, parts[1]) = &d
				evChanged = true
				writes = append(writes, persisted{[]any{"alerts", "events", parts[1]}, d.String()})
			case len(parts) == 2 && (parts[1] == "tau_e" || parts[1] == "tau_a"):
				if _, ok := cameraIndex(cfg, parts[0]); !ok {
					return refuse(http.StatusNotFound, "%s: no camera %q", p.Name, parts[0])
				}
				if err := profileShadows(cfg, p.Name, parts[0], parts[1], ""); err != nil {
					return err
				}
				th := cfg.Thresholds[parts[0]]
				if parts[1] == "tau_e" {
					th.TauE = &v
				} else {
					th.TauA = &v
				}
				setThresholds(cfg, parts[0], th)
				writes = append(writes, persisted{[]any{"thresholds", parts[0], parts[1]}, v})
			case len(parts) == 4 && parts[1] == "zones" && (parts[3] == "tau_e" || parts[3] == "tau_a"):
				if _, ok := cameraIndex(cfg, parts[0]); !ok {
					return refuse(http.StatusNotFound, "%s: no camera %q", p.Name, parts[0])
				}
				if err := profileShadows(cfg, p.Name, parts[0], parts[3], parts[2]); err != nil {
					return err
				}
				over := runconfig.Thresholds{}
				key := "tau_e_zones"
				if parts[3] == "tau_e" {
					over.TauEZones = map[string]float64{parts[2]: v}
				} else {
					over.TauAZones, key = map[string]float64{parts[2]: v}, "tau_a_zones"
				}
				setThresholds(cfg, parts[0], cfg.Thresholds[parts[0]].Merge(over))
				writes = append(writes, persisted{[]any{"thresholds", parts[0], key, parts[2]}, v})
			default:
				return refuse(http.StatusNotFound, "%s: no such parameter (/<camera>/tau_e|tau_a, /<camera>/zones/<zone>/tau_e|tau_a, /events/<key>)", p.Name)
			}
		}
		if evChanged {
			evo.Apply(&ev)
			if err := runconfig.ValidateEvents(ev, "alerts.events"); err != nil {
				return refuse(http.StatusUnprocessableEntity, "%w", err)
			}
			cfg.AlertsConfig.Config.Events = ev
		}
		return nil
	}
	var pf func(*yamlDoc) error
	if persist {
		pf = func(d *yamlDoc) error {
			for _, w := range writes {
				if err := d.set(w.path, w.v, true); err != nil {
					return err
				}
			}
			return nil
		}
	}
	err := c.change(ctx, fmt.Sprintf("parameters %v", names), who, edit, pf)
	out, gerr := c.GetParameters(names)
	if err == nil {
		err = gerr
	}
	return out, err
}

// profileShadows refuses (409, naming the profile and its key) a threshold
// the active profile decides, so that no change is accepted without
// effect: the camera's tau_e or tau_a (zone "") when the profile sets it,
// a zone's when the profile sets that zone's or supplies the camera's
// zones (the file's per-zone thresholds do not apply to the profile's
// zones: runconfig.SpecsWithProfile).
func profileShadows(cfg *runconfig.Config, param, camera, tau, zone string) error {
	pr, ok := cfg.Profiles[cfg.Profile]
	if !ok {
		return nil
	}
	pc, ok := pr.Cameras[camera]
	if !ok {
		return nil
	}
	key := "profiles." + cfg.Profile + ".cameras." + camera
	th := pc.Thresholds
	switch {
	case zone == "" && ((tau == "tau_e" && th.TauE != nil) || (tau == "tau_a" && th.TauA != nil)):
		return refuse(http.StatusConflict, "%s: profile %q sets %s.thresholds.%s; switch the profile off or edit the profile", param, cfg.Profile, key, tau)
	case zone == "":
		return nil
	case pc.HasZones():
		return refuse(http.StatusConflict, "%s: camera %s's zones come from profile %q (%s.zones), whose zone thresholds are %s.thresholds.%s_zones; switch the profile off first",
			param, camera, cfg.Profile, key, key, tau)
	}
	zones := th.TauEZones
	if tau == "tau_a" {
		zones = th.TauAZones
	}
	if _, ok := zones[zone]; ok {
		return refuse(http.StatusConflict, "%s: profile %q sets %s.thresholds.%s_zones.%s; switch the profile off or edit the profile", param, cfg.Profile, key, tau, zone)
	}
	return nil
}

// setThresholds replaces a camera's threshold overrides in cfg's own map.
func setThresholds(cfg *runconfig.Config, camera string, th runconfig.Thresholds) {
	m := make(map[string]runconfig.Thresholds, len(cfg.Thresholds)+1)
	for k, v := range cfg.Thresholds {
		m[k] = v
	}
	m[camera] = th
	cfg.Thresholds = m
}
