package sim

import (
	"fmt"
	"runtime"
)

// World names accepted by Config.World.
const (
	WorldOutdoor = "outdoor"
	WorldIndoor  = "indoor"
)

// Default output size: the usual KITTI training crop scaled to 192x640.
const (
	DefaultWidth  = 640
	DefaultHeight = 192
)

// KITTI colour camera 2 (left) rectified intrinsics at its native 1242x375;
// Intrinsics scales them to the output size.
const (
	KITTIWidth  = 1242
	KITTIHeight = 375
	kittiFx     = 721.5377
	kittiFy     = 721.5377
	kittiCx     = 609.5593
	kittiCy     = 172.8540
)

// Config selects the world and the output. The zero values of the optional
// fields give the documented defaults.
type Config struct {
	// World is "outdoor" or "indoor".
	World string
	// Width and Height of every output map in pixels.
	Width, Height int
	// Seed selects the layout, the sun and the ambient light.
	Seed int64
	// Fog is an extra extinction coefficient in 1/m (0 = clear air). It only
	// changes the RGB image, never the depth.
	Fog float32
	// Obstacles puts objects on the ego lane that the training data never
	// had (outdoor only): alternately a pile of crates and a fallen tree
	// (trunk across the lane with its crown), one every 35 m of road. The
	// lead car is left out so that nothing hides them. They are real
	// geometry: the depth, the LiDAR ground truth and the semantics see them.
	Obstacles bool
	// Parallelism is the number of goroutines one Render uses (0 = up to 2,
	// bounded by GOMAXPROCS). Data-set writers that run several renderers in
	// parallel set it to 1.
	Parallelism int
	// Heading turns the view horizontally by this many degrees (positive
	// to the right, within ±MaxHeading) as an off-axis projection: the
	// principal point moves by fx*tan(heading) pixels, so the pixel column
	// of the forward camera's optical axis looks along the heading, while the image plane stays parallel to the road's
	// direction (a side camera of a multi-camera rig in the demo). 0 is the
	// forward KITTI camera.
	Heading float64
	// Camera names the camera model (see Camera): "" or CameraKITTI, the
	// training camera, or CameraNewCam, the same roads through another
	// lens, colour response and sensor.
	Camera string
}

// MaxHeading bounds Config.Heading in degrees: further out, the off-axis
// projection stretches the image beyond use.
const MaxHeading = 40

func (c Config) validate() error {
	switch c.World {
	case WorldOutdoor, WorldIndoor:
	default:
		return fmt.Errorf("sim config: World %q is unknown (want %q or %q)", c.World, WorldOutdoor, WorldIndoor)
	}
	if c.Width <= 0 {
		return fmt.Errorf("sim config: Width must be positive, got %d", c.Width)
	}
	if c.Height <= 0 {
		return fmt.Errorf("sim config: Height must be positive, got %d", c.Height)
	}
	if c.Width > 16384 || c.Height > 16384 {
		return fmt.Errorf("sim config: Width x Height %dx%d exceeds 16384x16384", c.Width, c.Height)
	}
	if c.Fog < 0 || c.Fog != c.Fog {
		return fmt.Errorf("sim config: Fog must be >= 0, got %v", c.Fog)
	}
	if c.Obstacles && c.World != WorldOutdoor {
		return fmt.Errorf("sim config: Obstacles needs the %q world, not %q", WorldOutdoor, c.World)
	}
	if !(c.Heading >= -MaxHeading && c.Heading <= MaxHeading) {
		return fmt.Errorf("sim config: Heading must be within ±%d degrees, got %v", MaxHeading, c.Heading)
	}
	if _, err := LookupCamera(c.Camera); err != nil {
		return fmt.Errorf("sim config: Camera: %w", err)
	}
	if c.Parallelism < 0 {
		return fmt.Errorf("sim config: Parallelism must be >= 0, got %d", c.Parallelism)
	}
	return nil
}

func (c Config) workers() int {
	if c.Parallelism > 0 {
		return c.Parallelism
	}
	n := runtime.GOMAXPROCS(0)
	if n > 2 {
		n = 2
	}
	return n
}

// intrinsics returns the camera's intrinsics for the output size and
// heading (Camera.Intrinsics). Both worlds use the same camera by default:
// the data-set change is the scene, not the lens.
func (c Config) intrinsics() (fx, fy, cx, cy float64) {
	cam, _ := LookupCamera(c.Camera) // validated
	return cam.Intrinsics(c.Width, c.Height, c.Heading)
}
