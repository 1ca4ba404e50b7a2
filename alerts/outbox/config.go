package outbox

import (
	"fmt"
	"os"
	"path/filepath"
)

// Config is the outbox section of a deployment (alerts.outbox): where the
// durable event queue lives and its bounds.
type Config struct {
	Dir          string `yaml:"dir"`
	MaxBytes     int64  `yaml:"max_bytes"`
	MaxRecords   int    `yaml:"max_records"`
	SegmentBytes int64  `yaml:"segment_bytes"`
}

// ApplyDefaults fills the bounds left out: 64 MiB, 100000 records, 4 MiB
// segments.
func (c *Config) ApplyDefaults() {
	if c.MaxBytes == 0 {
		c.MaxBytes = 64 << 20
	}
	if c.MaxRecords == 0 {
		c.MaxRecords = 100000
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = 4 << 20
	}
}

// Validate checks the section; errors name the key within it ("dir: ...").
func (c Config) Validate() error {
	if c.Dir == "" {
		return fmt.Errorf("dir: required (events must survive restarts)")
	}
	if c.MaxBytes < 64<<10 {
		return fmt.Errorf("max_bytes: %d below 65536", c.MaxBytes)
	}
	if c.MaxRecords < 16 {
		return fmt.Errorf("max_records: %d below 16", c.MaxRecords)
	}
	if c.SegmentBytes < 4<<10 || c.SegmentBytes > c.MaxBytes {
		return fmt.Errorf("segment_bytes: %d outside [4096, max_bytes]", c.SegmentBytes)
	}
	return nil
}

// Options are the Open options of the section.
func (c Config) Options() Options {
	return Options{Dir: c.Dir, MaxBytes: c.MaxBytes, MaxRecords: c.MaxRecords, SegmentBytes: c.SegmentBytes}
}

// ResolvePaths makes a relative Dir relative to dir, the directory of the
// config file.
func (c *Config) ResolvePaths(dir string) {
	if c.Dir != "" && !filepath.IsAbs(c.Dir) {
		c.Dir = filepath.Join(dir, c.Dir)
	}
}

// CheckDir checks that the outbox directory can be made: its parent is a
// directory (the outbox makes the directory itself); key names it
// (e.g. "alerts.outbox.dir").
func (c Config) CheckDir(key string) error {
	if parent := filepath.Dir(c.Dir); parent != "" {
		if st, err := os.Stat(parent); err != nil || !st.IsDir() {
			return fmt.Errorf("%s: parent %q is not a directory", key, parent)
		}
	}
	return nil
}
