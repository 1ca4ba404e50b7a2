package runconfig

import (
	"fmt"
	"time"
)

// PipelineConfig tunes the frame loop.
type PipelineConfig struct {
	// Tick is how often stall detection and stats run (default 250ms).
	Tick time.Duration `yaml:"tick"`
	// BatchSize is the most frames (of different cameras) one run of each
	// model takes. 0 (the default) means min(cameras, 4) when a GPU
	// provider is configured and both models have a dynamic batch
	// dimension, and 1 otherwise (Config.DefaultBatchSize); above 1 both
	// models must have one (didoedge model batch).
	BatchSize int `yaml:"batch_size"`
	// CameraRestart: a camera that processed no frame for this long has
	// its source restarted inside the process (and again every
	// camera_restart while it stays dead), while the other cameras go on;
	// the unit is restarted only when the whole pipeline is stuck
	// (docs/deploy.md). Default 10s.
	CameraRestart time.Duration `yaml:"camera_restart"`
	// MaxCameras bounds the cameras of the file and those added at run
	// time (POST /api/cameras): each costs a fetcher, an engine, metrics
	// series and buffers (default DefaultMaxCameras, at most 256).
	MaxCameras int `yaml:"max_cameras"`
}

// DefaultMaxCameras is pipeline.max_cameras's default.
const DefaultMaxCameras = 16

// DefaultCameraRestart is pipeline.camera_restart's default: longer than
// an RTSP client's own reconnect cycle (backoff_max 5s), so that a restart
// is for a camera its client did not bring back.
const DefaultCameraRestart = 10 * time.Second

func (p *PipelineConfig) defaults() {
	if p.CameraRestart == 0 {
		p.CameraRestart = DefaultCameraRestart
	}
	if p.MaxCameras == 0 {
		p.MaxCameras = DefaultMaxCameras
	}
	if p.Tick == 0 {
		p.Tick = 250 * time.Millisecond
	}
}

// validate checks the section for a file of cameras cameras (the list
// form's); errors name pipeline.<key>.
func (p PipelineConfig) validate(cameras int) []error {
	var errs []error
	if p.CameraRestart < time.Second {
		errs = append(errs, fmt.Errorf("pipeline.camera_restart: %v is below 1s", p.CameraRestart))
	} else if p.CameraRestart > time.Hour {
		errs = append(errs, fmt.Errorf("pipeline.camera_restart: %v is above 1h", p.CameraRestart))
	}
	if p.MaxCameras < 1 || p.MaxCameras > 256 {
		errs = append(errs, fmt.Errorf("pipeline.max_cameras: %d is not in 1..256", p.MaxCameras))
	} else if cameras > p.MaxCameras {
		errs = append(errs, fmt.Errorf("cameras: %d cameras, more than pipeline.max_cameras (%d)", cameras, p.MaxCameras))
	}
	if p.Tick < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("pipeline.tick: %v is below 10ms", p.Tick))
	} else if p.Tick > 10*time.Second {
		errs = append(errs, fmt.Errorf("pipeline.tick: %v is above 10s", p.Tick))
	}
	if p.BatchSize < 0 || p.BatchSize > MaxBatchSize {
		errs = append(errs, fmt.Errorf("pipeline.batch_size: %d is not in 0..%d (0: min(cameras, %d) for dynamic-batch models on a GPU provider, else 1)", p.BatchSize, MaxBatchSize, DefaultMaxBatch))
	}
	return errs
}
