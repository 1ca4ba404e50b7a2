package upload

import (
	"fmt"

	"github.com/didoedge/didoedge/internal/objstore"
)

// Defaults and bounds of Config.
const (
	DefaultMaxBytes = 8 << 30  // the queue's byte budget
	DefaultPartSize = 16 << 20 // multipart part size
	MinPartSize     = 5 << 20  // S3's minimum for every part but the last
	MaxParts        = 10000    // S3's maximum part count
)

// Config is the upload: section of a recorder's settings.
type Config struct {
	// Dir holds the queue: one data file and one sidecar per item. It
	// must be on the recorder's filesystem (items are moved, not copied).
	Dir string `yaml:"dir"`
	// Target is s3://bucket/prefix; objects are
	// prefix/<vehicle>/<camera>/<file name>.
	Target string `yaml:"target"`
	// MaxBytes is the queue's byte budget: Enqueue refuses a file that
	// would take the queue above it (the file stays where it was).
	MaxBytes int64 `yaml:"max_bytes"`
	// PartSize is the size of a multipart upload's parts; files up to it
	// go in one PUT.
	PartSize int64 `yaml:"part_size"`
	// RateLimit caps the upload in bytes per second (0: no cap), to leave
	// the vehicle's uplink to the alerts.
	RateLimit int64 `yaml:"rate_limit"`
}

// WithDefaults fills the keys left out.
func (c Config) WithDefaults() Config {
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.PartSize == 0 {
		c.PartSize = DefaultPartSize
	}
	return c
}

// Validate checks a config after WithDefaults; errors name the key under
// prefix (for example "record.upload").
func (c Config) Validate(prefix string) error {
	key := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	if c.Dir == "" {
		return fmt.Errorf("%s: required", key("dir"))
	}
	if _, err := objstore.ParseURL(c.Target); err != nil {
		return fmt.Errorf("%s: %w", key("target"), err)
	}
	switch {
	case c.MaxBytes <= 0:
		return fmt.Errorf("%s: %d is not positive", key("max_bytes"), c.MaxBytes)
	case c.PartSize < MinPartSize:
		return fmt.Errorf("%s: %d is below S3's minimum part of %d bytes", key("part_size"), c.PartSize, MinPartSize)
	case c.RateLimit < 0:
		return fmt.Errorf("%s: %d is negative", key("rate_limit"), c.RateLimit)
	}
	return nil
}
