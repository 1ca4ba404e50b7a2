package runconfig

import (
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
)

func TestDomainSection(t *testing.T) {
	dir := configDir(t)
	c, err := Parse("run.yaml", []byte(validConfig()), dir)
	if err != nil {
		t.Fatal(err)
	}
	d := c.Domain
	if d.Off || d.Window != time.Second || !d.Threshold.Calibrated() || d.FalseAlarmRate != 0.01 ||
		d.PersistenceOrDefault() != 2*time.Minute || d.Policy != alerts.DomainFlag {
		t.Errorf("defaults: %+v", d)
	}
	c, err = Parse("run.yaml", []byte(validConfig()+"domain: {window: 1500ms, threshold: 2.5, persistence: 0s, policy: suppress}\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Domain; d.Window != 1500*time.Millisecond || d.Threshold.Value != 2.5 || d.PersistenceOrDefault() != 0 || d.Policy != alerts.DomainSuppress {
		t.Errorf("set: %+v", d)
	}
	for _, tc := range []struct{ text, want string }{
		{"domain: {window: -1s}", "domain.window"},
		{"domain: {threshold: -2}", "domain.threshold"},
		{"domain: {threshold: lots}", "domain.threshold"},
		{"domain: {threshold: [1]}", "domain.threshold"},
		{"domain: {false_alarm_rate: 2}", "domain.false_alarm_rate"},
		{"domain: {persistence: 48h}", "domain.persistence"},
		{"domain: {policy: ignore}", "domain.policy"},
		{"domain: {windows: 1s}", "windows"},
	} {
		_, err := Parse("run.yaml", []byte(validConfig()+tc.text+"\n"), dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "run.yaml") {
			t.Errorf("%s: %v, want an error naming %s and the file", tc.text, err, tc.want)
		}
	}
}
