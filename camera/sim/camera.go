package sim

import (
	"fmt"
	"math"
	"sort"
)

// Camera names accepted by Config.Camera ("" is CameraKITTI).
const (
	// CameraKITTI is the training camera: KITTI's colour camera 2
	// intrinsics scaled to the output size, the sRGB transfer curve, no
	// sensor noise. Every model of the project was trained on it.
	CameraKITTI = "kitti"
	// CameraNewCam is a different camera on the same car and roads: a wide
	// 16:9 dashcam sensor (1280x720, fx = fy = 560 px, about 97 degrees of
	// horizontal view against KITTI's 81), a warm white balance, low
	// saturation, a plain power-law gamma with lifted blacks, and shot plus
	// read noise. It is the "new camera" the domain monitor must notice.
	CameraNewCam = "newcam"
)

// Camera is the model of one simulated camera: the lens (native pinhole
// intrinsics and how they map to an output size) and the colour pipeline
// from scene radiance (linear RGB, 1 = the sRGB white) to 8-bit values.
//
// The pipeline of a pixel with linear colour c, in this order:
//
//	white balance:  c_k <- Gains_k * c_k
//	saturation:     Y = 0.2126 c_R + 0.7152 c_G + 0.0722 c_B (Rec. 709 luma),
//	                c_k <- Y + Saturation * (c_k - Y)
//	sensor noise:   c_k <- max(0, c_k + n_k), n_k of variance ShotNoise*c_k + ReadNoise^2
//	encoding:       v_k = 255 * (Black + (1-Black) * min(1, c_k)^(1/Gamma))
//
// Gamma 0 selects the sRGB transfer curve instead of the power law (the
// KITTI camera); Gains (1,1,1), Saturation 1, Black 0 and no noise make the
// first steps the identity.
type Camera struct {
	Name string
	// NativeWidth x NativeHeight is the sensor's resolution, Fx, Fy, Cx, Cy
	// its intrinsics there (pixel centres at integer coordinates).
	NativeWidth, NativeHeight int
	Fx, Fy, Cx, Cy            float64
	// Crop maps an output size of another aspect ratio by scaling the
	// sensor uniformly to cover the output and cropping the centre (what a
	// camera driver does); without it each axis is scaled on its own (the
	// KITTI camera, whose 192x640 output has nearly its native aspect).
	Crop bool
	// Colour pipeline (see the type's comment).
	Gains      [3]float64
	Saturation float64
	Gamma      float64
	Black      float64
	// ShotNoise is the variance per unit of linear signal, ReadNoise the
	// standard deviation of the signal-independent part, both on linear
	// values in [0, 1].
	ShotNoise, ReadNoise float64
}

var cameras = map[string]Camera{
	CameraKITTI: {Name: CameraKITTI, NativeWidth: KITTIWidth, NativeHeight: KITTIHeight,
		Fx: kittiFx, Fy: kittiFy, Cx: kittiCx, Cy: kittiCy,
		Gains: [3]float64{1, 1, 1}, Saturation: 1},
	CameraNewCam: {Name: CameraNewCam, NativeWidth: 1280, NativeHeight: 720,
		Fx: 560, Fy: 560, Cx: 652.5, Cy: 371.5, Crop: true,
		// a tungsten-like preset under daylight: red up, blue down
		Gains: [3]float64{1.22, 1, 0.74}, Saturation: 0.65, Gamma: 2.6, Black: 0.04,
		// at a linear grey of 0.25: sigma = sqrt(0.0016*0.25 + 0.006^2) = 0.021
		ShotNoise: 0.0016, ReadNoise: 0.006},
}

// Cameras lists the camera names, sorted.
func Cameras() []string {
	out := make([]string, 0, len(cameras))
	for n := range cameras {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// LookupCamera returns the camera model of name ("" is CameraKITTI).
func LookupCamera(name string) (Camera, error) {
	if name == "" {
		name = CameraKITTI
	}
	c, ok := cameras[name]
	if !ok {
		return Camera{}, fmt.Errorf("camera %q is unknown (want one of %v)", name, Cameras())
	}
	return c, nil
}

// DefaultSize is the output size the camera's frames have by default: 192x640
// for the KITTI camera (the training crop), the sensor's 16:9 scaled to 640
// columns (360x640) for the others.
func (c Camera) DefaultSize() (h, w int) {
	if c.Name == CameraKITTI {
		return DefaultHeight, DefaultWidth
	}
	return int(math.Round(float64(DefaultWidth) * float64(c.NativeHeight) / float64(c.NativeWidth))), DefaultWidth
}

// Intrinsics maps the native intrinsics to an output of width x height
// pixels and turns the view by heading degrees (an off-axis projection: the
// principal point moves by fx*tan(heading)). With Crop the scale is
// s = max(width/NativeWidth, height/NativeHeight) on both axes and the
// centre of the scaled sensor is kept; otherwise sx = width/NativeWidth and
// sy = height/NativeHeight. A principal point scales as a pixel-centre
// coordinate: c' = (c + 0.5) s - 0.5 - offset.
func (c Camera) Intrinsics(width, height int, heading float64) (fx, fy, cx, cy float64) {
	sx := float64(width) / float64(c.NativeWidth)
	sy := float64(height) / float64(c.NativeHeight)
	var ox, oy float64
	if c.Crop {
		s := math.Max(sx, sy)
		sx, sy = s, s
		ox = (float64(c.NativeWidth)*s - float64(width)) / 2
		oy = (float64(c.NativeHeight)*s - float64(height)) / 2
	}
	fx, fy = c.Fx*sx, c.Fy*sy
	cx = (c.Cx+0.5)*sx - 0.5 - ox - fx*math.Tan(heading*math.Pi/180)
	cy = (c.Cy+0.5)*sy - 0.5 - oy
	return fx, fy, cx, cy
}

// Balance applies the white balance and the saturation to a linear colour
// (the pipeline's first two steps).
func (c Camera) Balance(lin [3]float64) [3]float64 {
	var b [3]float64
	for k := range b {
		b[k] = c.Gains[k] * lin[k]
	}
	y := 0.2126*b[0] + 0.7152*b[1] + 0.0722*b[2]
	for k := range b {
		b[k] = y + c.Saturation*(b[k]-y)
	}
	return b
}

// EncodeValue is the transfer curve of one linear channel value to [0, 1]
// (the pipeline's last step before the factor 255).
func (c Camera) EncodeValue(x float64) float64 {
	x = math.Min(1, math.Max(0, x))
	if c.Gamma == 0 {
		// sRGB transfer function
		if x <= 0.0031308 {
			return 12.92 * x
		}
		return 1.055*math.Pow(x, 1/2.4) - 0.055
	}
	return c.Black + (1-c.Black)*math.Pow(x, 1/c.Gamma)
}

// Encode is the noiseless pipeline of a linear colour to 8-bit values
// (rounded to the nearest).
func (c Camera) Encode(lin [3]float64) [3]uint8 {
	b := c.Balance(lin)
	var out [3]uint8
	for k := range out {
		out[k] = uint8(math.Round(255 * c.EncodeValue(b[k])))
	}
	return out
}

// identity reports whether the colour pipeline before encoding is the
// identity and there is no noise (the renderer's fast path).
func (c Camera) identity() bool {
	return c.Gains == [3]float64{1, 1, 1} && c.Saturation == 1 && c.ShotNoise == 0 && c.ReadNoise == 0
}

// encodeLUTSize is the resolution of the renderer's table of the transfer
// curve: 2^16 steps keep the 8-bit result within one step of the closed
// form even where a power law with gamma 2.6 is steepest (near black, a step
// of 1/65535 in x moves 255 x^(1/2.6) by at most 1 at x >= 1e-4 and by at
// most 255 * 65535^(-1/2.6) = 3.6 below it).
const encodeLUTSize = 1 << 16

// newEncodeLUT tabulates 255 * EncodeValue at x = i/(encodeLUTSize-1),
// rounded.
func (c Camera) newEncodeLUT() []uint8 {
	lut := make([]uint8, encodeLUTSize)
	for i := range lut {
		lut[i] = uint8(math.Round(255 * c.EncodeValue(float64(i)/(encodeLUTSize-1))))
	}
	return lut
}

// sensorNoise returns zero-mean noise of unit variance for channel k of
// pixel i of frame index: the sum of four uniform variates (Irwin-Hall,
// variance 4/12) scaled by sqrt(3). Frame i's noise is a pure function of
// (seed, index, pixel, channel).
func sensorNoise(seed uint32, index, i, k int) float32 {
	h1 := hash3(seed, uint32(index), uint32(3*i+k))
	h2 := hash3(seed^0xA5A5A5A5, uint32(index), uint32(3*i+k))
	const inv = 1.0 / 65536
	s := float32(h1&0xFFFF)*inv + float32(h1>>16)*inv + float32(h2&0xFFFF)*inv + float32(h2>>16)*inv
	return (s - 2) * 1.7320508
}
