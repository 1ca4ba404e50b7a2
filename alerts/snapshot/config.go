package snapshot

import (
	"fmt"
	"path/filepath"
)

// Config configures event snapshots (alerts.snapshots): a JPEG of the
// event's frame with the epistemic heat map, the zone outline and its
// level, kept in a bounded directory and published retained.
type Config struct {
	// Dir is the on-disk store; empty turns snapshots off.
	Dir string `yaml:"dir"`
	// MaxBytes bounds the store; the oldest snapshots go first.
	MaxBytes int64 `yaml:"max_bytes"`
	// Quality is the JPEG quality, 1..100.
	Quality int `yaml:"quality"`
}

// ApplyDefaults fills the keys left out: a 64 MiB store, quality 80.
func (c *Config) ApplyDefaults() {
	if c.MaxBytes == 0 {
		c.MaxBytes = 64 << 20
	}
	if c.Quality == 0 {
		c.Quality = 80
	}
}

// Validate checks the section (only when snapshots are on); errors name
// the key within it.
func (c Config) Validate() error {
	if c.Dir == "" {
		return nil
	}
	if c.MaxBytes < 1<<20 {
		return fmt.Errorf("max_bytes: %d below 1 MiB", c.MaxBytes)
	}
	if c.Quality < 1 || c.Quality > 100 {
		return fmt.Errorf("quality: %d outside [1,100]", c.Quality)
	}
	return nil
}

// ResolvePaths makes a relative Dir relative to dir, the directory of the
// config file.
func (c *Config) ResolvePaths(dir string) {
	if c.Dir != "" && !filepath.IsAbs(c.Dir) {
		c.Dir = filepath.Join(dir, c.Dir)
	}
}
