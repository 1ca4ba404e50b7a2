package runconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOverridesConfig: thresholds:, profiles: and profile: are validated
// against the cameras and their zones, every error names its key, and
// the active profile's zones, thresholds and timings are what the
// cameras' engine specs get.
func TestOverridesConfig(t *testing.T) {
	dir := configDir(t)
	const night = `profiles:
  night:
    events: {exit_inertia: 3s}
    cameras:
      front:
        zones: [{name: road, polygon: [[0, 0.5], [1, 0.5], [1, 1], [0, 1]]}]
        thresholds: {tau_e: 0.5, tau_a_zones: {road: 0.3}}
`
	for _, c := range []struct {
		name, extra string
		parts       []string
	}{
		{"valid", "thresholds: {front: {tau_e: 0.7, tau_e_zones: {r0c1: 0.2}}}\n" + night, nil},
		{"active profile", night + "profile: night\n", nil},
		{"unknown camera in thresholds", "thresholds: {rear: {tau_e: 0.7}}\n", []string{"thresholds.rear: no camera \"rear\""}},
		{"threshold out of range", "thresholds: {front: {tau_e: 1.7}}\n", []string{"thresholds.front.tau_e: 1.7 outside (0,1]"}},
		{"threshold of a zone the camera lacks", "thresholds: {front: {tau_e_zones: {road: 0.2}}}\n", []string{`thresholds.front.tau_e_zones.road: the camera has no zone "road"`}},
		{"unknown key in a threshold", "thresholds: {front: {tau_x: 1}}\n", []string{"thresholds.front.tau_x: unknown key"}},
		{"unknown profile", night + "profile: dusk\n", []string{`profile: "dusk" is not one of profiles ([night])`}},
		{"profile camera", "profiles: {night: {cameras: {rear: {thresholds: {tau_e: 0.5}}}}}\n", []string{`profiles.night.cameras.rear: no camera "rear"`}},
		{"profile zones", "profiles: {night: {cameras: {front: {zones: [{name: a, polygon: [[0, 0], [2, 0], [1, 1]]}]}}}}\n", []string{"profiles.night.cameras.front.zones[0].polygon"}},
		{"profile events", "profiles: {night: {events: {merge_window: -1s}}}\n", []string{"profiles.night.events.merge_window: -1s is negative"}},
		{"profile events below a bound", "profiles: {night: {events: {fusion_time_constant: 1ns}}}\n", []string{"profiles.night.events.fusion_time_constant: 1ns is below 1ms (0: no fusion)"}},
		{"profile name", "profiles: {Night: {}}\n", []string{"profiles.Night: name must match"}},
		{"live off by default", "live: {}\n", nil},
		{"live on a network address without a token", "live: {listen: \"0.0.0.0:8765\"}\n", []string{"live.token_file: required when live.listen"}},
		{"live origins", "live: {listen: \"127.0.0.1:8765\", allowed_origins: [\"https://app.foxglove.dev\", \"http://127.0.0.1:3000\"]}\n", nil},
		{"live origin with a path", "live: {listen: \"127.0.0.1:8765\", allowed_origins: [\"https://app.foxglove.dev/studio\"]}\n", []string{`live.allowed_origins[0]: "https://app.foxglove.dev/studio" is not an origin`}},
		{"live origin wildcard", "live: {listen: \"127.0.0.1:8765\", allowed_origins: [\"https://*.foxglove.dev\"]}\n", []string{`live.allowed_origins[0]`, `is not a DNS name`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse("cfg.yaml", []byte(validConfig()+c.extra), dir)
			if len(c.parts) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				specs, err := cfg.CameraSpecs()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := specs[0].EngineSpec(); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted")
			}
			for _, p := range c.parts {
				if !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "cfg.yaml") {
					t.Fatalf("error %q does not name %q", err, p)
				}
			}
		})
	}
	cfg, err := Parse("cfg.yaml", []byte(validConfig()+"thresholds: {front: {tau_e: 0.7}}\n"+night+"profile: night\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	specs, _ := cfg.CameraSpecs()
	es, err := specs[0].EngineSpec()
	if err != nil {
		t.Fatal(err)
	}
	// The profile's tau_e wins over thresholds:, its zone replaces the grid.
	if es.Calibration.TauE != 0.5 || es.Calibration.TauAFor("road") != 0.3 || len(es.Zones) != 1 || es.Zones[0].Name != "road" ||
		es.Config.Timing.ExitInertia.Seconds() != 3 {
		t.Fatalf("engine spec under night: tau_e %v, tau_a(road) %v, zones %v, timing %+v", es.Calibration.TauE, es.Calibration.TauAFor("road"), es.Zones, es.Config.Timing)
	}
	if specs, _ := cfg.SpecsWithProfile(""); specs[0].Thresholds.TauE == nil || *specs[0].Thresholds.TauE != 0.7 {
		t.Fatalf("without the profile: %+v", specs[0].Thresholds)
	}
	_ = os.Remove(filepath.Join(dir, "unused"))
}
