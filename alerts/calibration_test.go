package alerts

import (
	"bytes"
	"strings"
	"testing"
)

const validCal = `version: 1
tau_e: 0.6
tau_e_zones: {lane: 0.5}
tau_a: 0.15
scale_correction: 1.3
coverage: 0.9
levels:
  ood_fraction: {warn: {enter: 0.05, exit: 0.03}, critical: {enter: 0.2, exit: 0.12}}
  pessimistic_depth_m: {warn: {enter: 8, exit: 10}, critical: {enter: 4, exit: 5}}
meta: {dataset: kitti-val}
`

func TestParseCalibration(t *testing.T) {
	c, err := ParseCalibration("cal.yaml", []byte(validCal))
	if err != nil {
		t.Fatal(err)
	}
	if c.TauE != 0.6 || c.tauEFor("lane") != 0.5 || c.tauEFor("other") != 0.6 || c.ScaleCorrection != 1.3 ||
		c.Levels.AleatoricFraction != nil || c.Levels.PessimisticDepth.Critical.Exit != 5 {
		t.Fatalf("parsed %+v", c)
	}
	// Round trip through WriteCalibration.
	var buf bytes.Buffer
	if err := WriteCalibration(&buf, c); err != nil {
		t.Fatal(err)
	}
	c2, err := ParseCalibration("written", buf.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if c2.TauE != c.TauE || c2.Levels.OODFraction.Warn != c.Levels.OODFraction.Warn || c2.Meta["dataset"] != "kitti-val" {
		t.Fatalf("round trip %+v != %+v", c2, c)
	}
	// JSON is YAML too.
	js := `{"version":1,"tau_e":0.5,"tau_a":0.2,"scale_correction":1,"coverage":0.8,"levels":{"ood_fraction":{"warn":{"enter":0.1,"exit":0.05},"critical":{"enter":0.3,"exit":0.2}}}}`
	if _, err := ParseCalibration("cal.json", []byte(js)); err != nil {
		t.Fatal(err)
	}
	if err := DefaultCalibration().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
}

func TestParseCalibrationErrorsNameKey(t *testing.T) {
	tests := []struct{ name, from, to, want string }{
		{"version", "version: 1", "version: 2", "cal.yaml: version: 2, want 1"},
		{"tau_e range", "tau_e: 0.6", "tau_e: 1.5", "cal.yaml: tau_e: 1.5 outside (0,1]"},
		{"tau_e zone", "{lane: 0.5}", "{lane: 0}", "cal.yaml: tau_e_zones.lane: 0 outside (0,1]"},
		{"tau_a", "tau_a: 0.15", "tau_a: -1", "cal.yaml: tau_a: -1 must be > 0"},
		{"coverage", "coverage: 0.9", "coverage: 1", "cal.yaml: coverage: 1 outside (0,1)"},
		{"scale", "scale_correction: 1.3", "scale_correction: 0", "cal.yaml: scale_correction: 0 must be > 0"},
		{"exit above enter", "{enter: 0.05, exit: 0.03}", "{enter: 0.05, exit: 0.07}", "cal.yaml: levels.ood_fraction.warn.exit: 0.07 above enter 0.05"},
		{"depth exit below", "{enter: 8, exit: 10}", "{enter: 8, exit: 6}", "cal.yaml: levels.pessimistic_depth_m.warn.exit: 6 below enter 8"},
		{"critical below warn", "critical: {enter: 0.2, exit: 0.12}", "critical: {enter: 0.01, exit: 0.01}", "cal.yaml: levels.ood_fraction.critical.enter: 0.01 below warn.enter"},
		{"fraction above 1", "critical: {enter: 0.2, exit: 0.12}", "critical: {enter: 2, exit: 0.12}", "cal.yaml: levels.ood_fraction.critical.enter: 2 outside [0,1]"},
		{"unknown key", "tau_a: 0.15", "tau_b: 0.15", "cal.yaml: tau_b: unknown key"},
		{"unknown nested", "warn: {enter: 0.05, exit: 0.03}", "warn: {enter: 0.05, exits: 0.03}", "cal.yaml: levels.ood_fraction.warn.exits: unknown key"},
		{"type", "tau_a: 0.15", "tau_a: high", "cal.yaml: tau_a: cannot unmarshal"},
		{"no criteria", "levels:", "levelz:", "cal.yaml: levelz: unknown key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(validCal, tc.from, tc.to, 1)
			if doc == validCal {
				t.Fatalf("replacement %q not found", tc.from)
			}
			_, err := ParseCalibration("cal.yaml", []byte(doc))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want prefix %q", err, tc.want)
			}
		})
	}
}

func FuzzParseCalibration(f *testing.F) {
	f.Add([]byte(validCal))
	f.Add([]byte(`{"version":1,"tau_e":0.5,"tau_a":0.2,"scale_correction":1,"coverage":0.8,"levels":{}}`))
	f.Add([]byte("version: 1\ntau_e: .nan\n"))
	f.Add([]byte("levels: {ood_fraction: {warn: {enter: 1e400}}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCalibration("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml: ") {
				t.Fatalf("error without file name: %v", err)
			}
			return
		}
		if _, err := NewAssessor([]Zone{{Name: "a", Polygon: [][2]float64{{0, 0}, {1, 0}, {1, 1}}}}, nil, c); err != nil {
			t.Fatalf("valid calibration rejected by the assessor: %v", err)
		}
	})
}
