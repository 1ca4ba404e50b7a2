package record

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/didoedge/didoedge/internal/yamlstrict"
	"github.com/didoedge/didoedge/runtime/record/upload"
)

// Modes of the recorder.
const (
	ModeOff        = "off"
	ModeContinuous = "continuous"
	ModeEvent      = "event"
)

// Maps that can be recorded beside the frame.
const (
	MapDepth     = "depth"
	MapScale     = "laplace_scale"
	MapEpistemic = "epistemic"
	// MapConfidence is the depth model's own confidence read-out u (its
	// io spec's confidence key), recorded when the model has one.
	MapConfidence = "confidence"
)

// Config is the `record:` section of the runtime configuration.
//
//	record:
//	  mode: event              # off (default), continuous, event
//	  dir: /var/lib/didoedge/recordings
//	  budget_bytes: 8589934592 # all recordings in dir together (8 GiB)
//	  rotate_bytes: 268435456  # a new file past this size (256 MiB) ...
//	  rotate_time: 5m          # ... or this much recorded time
//	  pre_roll: 5s             # event mode: kept in memory before an episode opens
//	  post_roll: 5s            # event mode: recorded after the last episode ended
//	  ring_bytes: 134217728    # event mode: memory bound of the pre-roll ring (128 MiB)
//	  frame_format: jpeg       # jpeg or png (lossless, for exact replays)
//	  jpeg_quality: 90
//	  maps: [depth, laplace_scale, epistemic]
//	  map_resolution: computed # computed (the models' grids, default) or frame (resampled to the frame)
//	  map_precision: float16   # float16 (default: relative error <= 2^-11) or float32
//	  map_mantissa_bits: 23    # float32 only: 23 exact; 10 rounds like float16's precision
//	  queue: 4                 # frames waiting for the recorder; more are dropped
//	  compression: zstd        # MCAP chunk compression: zstd, lz4 or none
//	  chunk_bytes: 4194304     # uncompressed bytes per chunk (4 MiB): what a kill can lose
//	  intrinsics: [fx, fy, cx, cy]  # of the camera's frames, pixels; recorded as camera_calibration
//	  upload:                  # finished files go to object storage (runtime/record/upload)
//	    target: s3://fleet-recordings/drives   # objects <prefix>/<vehicle>/<camera>/<file>
//	    dir: /var/lib/didoedge/recordings/upload  # the queue (default <dir>/upload; same filesystem as dir)
//	    max_bytes: 8589934592  # the queue's byte budget, apart from budget_bytes (8 GiB)
//	    part_size: 16777216    # multipart part size (16 MiB); smaller files go in one PUT
//	    rate_limit: 0          # bytes/s; 0: no cap
type Config struct {
	Mode        string        `yaml:"mode"`
	Dir         string        `yaml:"dir"`
	BudgetBytes int64         `yaml:"budget_bytes"`
	RotateBytes int64         `yaml:"rotate_bytes"`
	RotateTime  time.Duration `yaml:"rotate_time"`
	PreRoll     time.Duration `yaml:"pre_roll"`
	PostRoll    time.Duration `yaml:"post_roll"`
	RingBytes   int64         `yaml:"ring_bytes"`
	FrameFormat string        `yaml:"frame_format"`
	JPEGQuality int           `yaml:"jpeg_quality"`
	// Maps lists the maps recorded beside each frame; nil records all
	// three, an empty list none.
	Maps []string `yaml:"maps"`
	// MapResolution is the grid the maps are recorded on: MapsComputed
	// (the grid each model computed its map on, with the rule that
	// resamples it to the frame in the channel's metadata) or MapsFrame
	// (the frame's size, as the alerts saw them).
	MapResolution string `yaml:"map_resolution"`
	// MapPrecision is MapsFloat16 (IEEE binary16: relative error at most
	// 2^-11; a map beyond its range, |v| >= 65520, is written in float32)
	// or MapsFloat32.
	MapPrecision string `yaml:"map_precision"`
	// MapMantissaBits is the precision of float32 maps: values are rounded
	// to this many of float32's 23 mantissa bits (relative error at most
	// 2^-(bits+1)); 23 records them exactly. Setting it without
	// map_precision means float32.
	MapMantissaBits int    `yaml:"map_mantissa_bits"`
	Queue           int    `yaml:"queue"`
	Compression     string `yaml:"compression"`
	ChunkBytes      int64  `yaml:"chunk_bytes"`
	// Intrinsics are fx, fy, cx, cy of the camera's frames in pixels; the
	// pipeline records them as each camera's foxglove.CameraCalibration
	// (what `didoedge record export` writes into the KITTI meta.json).
	// Empty: no camera_calibration channel.
	Intrinsics []float64 `yaml:"intrinsics"`
	// Upload, when set, hands every finished file (an event clip when it
	// closes, a continuous file when rotated and at Close) to a durable
	// upload queue. Queued files leave dir (they are moved into
	// Upload.Dir) and count against Upload.MaxBytes only; budget_bytes
	// bounds what is still in dir: the open file and finished files the
	// full queue refused, which wait there and are offered again.
	Upload *upload.Config `yaml:"upload"`
}

// Defaults of the keys left out.
const (
	DefaultBudgetBytes = 8 << 30
	DefaultRotateBytes = 256 << 20
	DefaultRotateTime  = 5 * time.Minute
	DefaultPreRoll     = 5 * time.Second
	DefaultPostRoll    = 5 * time.Second
	DefaultRingBytes   = 128 << 20
	DefaultJPEGQuality = 90
	DefaultQueue       = 4
	DefaultChunkBytes  = 4 << 20
	// DefaultMapMantissaBits records float32 maps exactly. Fewer bits (10:
	// relative error 2^-11, 5 mm at 10 m) halve their compressed bytes
	// but cost zstd about 2.5 times the CPU (BenchmarkRecordFrame);
	// float16 gets the same precision from half the bytes before
	// compression.
	DefaultMapMantissaBits = 23
)

// Values of map_resolution and map_precision.
const (
	MapsComputed = "computed"
	MapsFrame    = "frame"
	MapsFloat16  = "float16"
	MapsFloat32  = "float32"
)

// Enabled reports whether the recorder should run.
func (c Config) Enabled() bool { return c.Mode != "" && c.Mode != ModeOff }

// WithDefaults fills the keys left out.
func (c Config) WithDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeOff
	}
	if c.BudgetBytes == 0 {
		c.BudgetBytes = DefaultBudgetBytes
	}
	if c.RotateBytes == 0 {
		c.RotateBytes = min(DefaultRotateBytes, c.BudgetBytes/2)
	}
	if c.RotateTime == 0 {
		c.RotateTime = DefaultRotateTime
	}
	if c.PreRoll == 0 {
		c.PreRoll = DefaultPreRoll
	}
	if c.PostRoll == 0 {
		c.PostRoll = DefaultPostRoll
	}
	if c.RingBytes == 0 {
		c.RingBytes = DefaultRingBytes
	}
	if c.FrameFormat == "" {
		c.FrameFormat = "jpeg"
	}
	if c.JPEGQuality == 0 {
		c.JPEGQuality = DefaultJPEGQuality
	}
	if c.Maps == nil {
		c.Maps = []string{MapDepth, MapScale, MapEpistemic, MapConfidence}
	}
	if c.MapResolution == "" {
		c.MapResolution = MapsComputed
	}
	if c.MapPrecision == "" {
		c.MapPrecision = MapsFloat16
		if c.MapMantissaBits != 0 {
			c.MapPrecision = MapsFloat32
		}
	}
	if c.MapMantissaBits == 0 && c.MapPrecision == MapsFloat32 {
		c.MapMantissaBits = DefaultMapMantissaBits
	}
	if c.Queue == 0 {
		c.Queue = DefaultQueue
	}
	if c.Compression == "" {
		c.Compression = "zstd"
	}
	if c.ChunkBytes == 0 {
		c.ChunkBytes = DefaultChunkBytes
	}
	if c.Upload != nil {
		u := c.Upload.WithDefaults()
		if u.Dir == "" && c.Dir != "" {
			u.Dir = filepath.Join(c.Dir, DefaultUploadDir)
		}
		c.Upload = &u
	}
	return c
}

// DefaultUploadDir is the upload queue's directory under dir when
// upload.dir is left out: on the recordings' filesystem by construction.
const DefaultUploadDir = "upload"

// Validate checks a config after WithDefaults; errors name the key under
// prefix (for example "record").
func (c Config) Validate(prefix string) error {
	key := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	bad := func(k string, format string, args ...any) error {
		return fmt.Errorf("%s: %s", key(k), fmt.Sprintf(format, args...))
	}
	switch c.Mode {
	case ModeOff, ModeContinuous, ModeEvent:
	default:
		return bad("mode", "%q is not off, continuous or event", c.Mode)
	}
	if c.Mode == ModeOff {
		return nil
	}
	if c.Dir == "" {
		return bad("dir", "required when recording")
	}
	if c.ChunkBytes < 64<<10 || c.ChunkBytes > 16<<20 {
		return bad("chunk_bytes", "%d outside [65536, 16777216]", c.ChunkBytes)
	}
	if c.RotateBytes < 2*c.ChunkBytes {
		return bad("rotate_bytes", "%d is below two chunks (2 x chunk_bytes = %d)", c.RotateBytes, 2*c.ChunkBytes)
	}
	if c.BudgetBytes < 2*c.RotateBytes {
		return bad("budget_bytes", "%d is below two files (2 x rotate_bytes = %d)", c.BudgetBytes, 2*c.RotateBytes)
	}
	if c.RotateTime < time.Second {
		return bad("rotate_time", "%v is below 1s", c.RotateTime)
	}
	if c.PreRoll < 0 || c.PreRoll > 10*time.Minute {
		return bad("pre_roll", "%v outside [0, 10m]", c.PreRoll)
	}
	if c.PostRoll < 0 || c.PostRoll > 10*time.Minute {
		return bad("post_roll", "%v outside [0, 10m]", c.PostRoll)
	}
	if c.RingBytes < 1<<20 {
		return bad("ring_bytes", "%d is below 1 MiB", c.RingBytes)
	}
	switch c.FrameFormat {
	case "jpeg", "png":
	default:
		return bad("frame_format", "%q is not jpeg or png", c.FrameFormat)
	}
	if c.JPEGQuality < 1 || c.JPEGQuality > 100 {
		return bad("jpeg_quality", "%d outside [1, 100]", c.JPEGQuality)
	}
	seen := map[string]bool{}
	for i, m := range c.Maps {
		switch m {
		case MapDepth, MapScale, MapEpistemic, MapConfidence:
		default:
			return bad(fmt.Sprintf("maps[%d]", i), "%q is not depth, laplace_scale, epistemic or confidence", m)
		}
		if seen[m] {
			return bad(fmt.Sprintf("maps[%d]", i), "%q listed twice", m)
		}
		seen[m] = true
	}
	switch c.MapResolution {
	case MapsComputed, MapsFrame:
	default:
		return bad("map_resolution", "%q is not computed or frame", c.MapResolution)
	}
	switch c.MapPrecision {
	case MapsFloat16:
		if c.MapMantissaBits != 0 {
			return bad("map_mantissa_bits", "applies to map_precision float32, not float16")
		}
	case MapsFloat32:
		if c.MapMantissaBits < 1 || c.MapMantissaBits > 23 {
			return bad("map_mantissa_bits", "%d outside [1, 23]", c.MapMantissaBits)
		}
	default:
		return bad("map_precision", "%q is not float16 or float32", c.MapPrecision)
	}
	if c.Queue < 1 || c.Queue > 256 {
		return bad("queue", "%d outside [1, 256]", c.Queue)
	}
	switch c.Compression {
	case "zstd", "lz4", "none":
	default:
		return bad("compression", "%q is not zstd, lz4 or none", c.Compression)
	}
	if u := c.Upload; u != nil {
		if err := u.Validate(key("upload")); err != nil {
			return err
		}
		if filepath.Clean(u.Dir) == filepath.Clean(c.Dir) {
			return bad("upload.dir", "%s is dir itself: give the queue its own directory (default %s under dir)", u.Dir, DefaultUploadDir)
		}
		if u.PartSize < (2*c.RotateBytes+upload.MaxParts-1)/upload.MaxParts { // part_size x MaxParts < 2 x rotate_bytes
			return bad("upload.part_size", "%d bytes x S3's %d parts is below two files (2 x rotate_bytes = %d)", u.PartSize, upload.MaxParts, 2*c.RotateBytes)
		}
		if u.MaxBytes < 2*c.RotateBytes {
			return bad("upload.max_bytes", "%d is below two files (2 x rotate_bytes = %d): a file could wait for the queue forever", u.MaxBytes, 2*c.RotateBytes)
		}
	}
	if n := len(c.Intrinsics); n != 0 {
		if n != 4 {
			return bad("intrinsics", "%d values, want [fx, fy, cx, cy]", n)
		}
		if !(c.Intrinsics[0] > 0 && c.Intrinsics[1] > 0) {
			return bad("intrinsics", "fx %g and fy %g must be positive", c.Intrinsics[0], c.Intrinsics[1])
		}
		for i, v := range c.Intrinsics {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return bad(fmt.Sprintf("intrinsics[%d]", i), "%g is not finite", v)
			}
		}
	}
	return nil
}

// ResolvePaths makes a relative dir relative to base (the config file's
// directory).
func (c *Config) ResolvePaths(base string) {
	if c.Dir != "" && !filepath.IsAbs(c.Dir) {
		c.Dir = filepath.Join(base, c.Dir)
	}
	if c.Upload != nil && c.Upload.Dir != "" && !filepath.IsAbs(c.Upload.Dir) {
		u := *c.Upload
		u.Dir = filepath.Join(base, u.Dir)
		c.Upload = &u
	}
}

// records reports whether map m is recorded.
func (c Config) records(m string) bool { return slices.Contains(c.Maps, m) }

// ParseConfig decodes a YAML document whose top-level key is `record:`
// (unknown keys rejected), applies the defaults, resolves dir against the
// file's directory and validates. name labels errors.
func ParseConfig(name string, data []byte) (Config, error) {
	var doc struct {
		Record Config `yaml:"record"`
	}
	if err := yamlstrict.Decode(data, &doc); err != nil {
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	c := doc.Record.WithDefaults()
	c.ResolvePaths(filepath.Dir(name))
	if err := c.Validate("record"); err != nil {
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}
