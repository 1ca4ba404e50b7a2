package mqttpub

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/internal/yamlstrict"
)

// testSection is an alerts section as the deployment config reads it (the
// domain's keys and the service's), for tests that cannot import
// runtime/runconfig (it imports this package).
type testSection struct {
	alerts.Config `yaml:",inline"`
	ServiceConfig `yaml:",inline"`
}

// parseTestSection decodes, defaults and validates a section as
// runconfig.ParseAlerts does (without snapshots).
func parseTestSection(name string, data []byte) (testSection, error) {
	var c testSection
	if err := yamlstrict.Decode(data, &c); err != nil {
		return c, fmt.Errorf("%s: %w", name, err)
	}
	c.Config.ApplyDefaults()
	c.ServiceConfig.ApplyDefaults(c.Vehicle, c.TopicPrefix)
	c.Config.StatsInterval = c.MQTT.StatsInterval
	if err := c.Config.Validate(); err != nil {
		return c, fmt.Errorf("%s: %w", name, err)
	}
	if err := c.ServiceConfig.Validate(c.TopicPrefix); err != nil {
		return c, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// loadTestSection reads a section file, paths relative to its directory.
func loadTestSection(path string) (testSection, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return testSection{}, err
	}
	c, err := parseTestSection(path, data)
	if err == nil {
		c.Config.ResolvePaths(filepath.Dir(path))
		c.ServiceConfig.ResolvePaths(filepath.Dir(path))
	}
	return c, err
}
