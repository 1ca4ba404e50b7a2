package sim

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestLookupCamera(t *testing.T) {
	for _, c := range []struct {
		name, want string
	}{{"", CameraKITTI}, {CameraKITTI, CameraKITTI}, {CameraNewCam, CameraNewCam}} {
		cam, err := LookupCamera(c.name)
		if err != nil || cam.Name != c.want {
			t.Errorf("LookupCamera(%q) = %q, %v; want %q", c.name, cam.Name, err, c.want)
		}
	}
	if _, err := LookupCamera("fisheye"); err == nil || !strings.Contains(err.Error(), `"fisheye"`) {
		t.Errorf("unknown camera: err = %v, want one naming it", err)
	}
	if _, err := NewRenderer(Config{World: WorldOutdoor, Width: 64, Height: 32, Camera: "fisheye"}); err == nil ||
		!strings.Contains(err.Error(), "Camera") {
		t.Errorf("config with an unknown camera: err = %v, want one naming the Camera field", err)
	}
}

// The new camera's sensor is 1280x720; an output of another aspect is the
// centre crop of the uniformly scaled sensor.
func TestNewCamIntrinsics(t *testing.T) {
	for _, c := range []struct {
		w, h           int
		fx, fy, cx, cy float64
		why            string
	}{
		{1280, 720, 560, 560, 652.5, 371.5, "native size"},
		// s = max(640/1280, 192/720) = 0.5; cx = 653*0.5 - 0.5; cy = 372*0.5 - 0.5 - (360-192)/2
		{640, 192, 280, 280, 326, 101.5, "192x640 crops rows"},
		// s = 0.5 on both axes: the 16:9 default size keeps the whole sensor
		{640, 360, 280, 280, 326, 185.5, "360x640 default"},
	} {
		r, err := NewRenderer(Config{World: WorldOutdoor, Width: c.w, Height: c.h, Camera: CameraNewCam})
		if err != nil {
			t.Fatal(err)
		}
		fx, fy, cx, cy := r.Intrinsics()
		for _, v := range []struct{ got, want float64 }{{fx, c.fx}, {fy, c.fy}, {cx, c.cx}, {cy, c.cy}} {
			if math.Abs(v.got-v.want) > 1e-9 {
				t.Errorf("%s: intrinsics (%v %v %v %v), want (%v %v %v %v)", c.why, fx, fy, cx, cy, c.fx, c.fy, c.cx, c.cy)
				break
			}
		}
	}
	cam, _ := LookupCamera(CameraNewCam)
	if h, w := cam.DefaultSize(); h != 360 || w != 640 {
		t.Errorf("new camera default size %dx%d, want 360x640", h, w)
	}
	// wider than the training camera at the same output size
	k, _ := NewRenderer(Config{World: WorldOutdoor, Width: 640, Height: 192})
	kfx, _, _, _ := k.Intrinsics()
	if !(kfx > 1.3*280) {
		t.Errorf("KITTI fx %v at 640 columns: want the new camera's 280 to be much wider", kfx)
	}
}

// Encode against the pipeline's closed form worked out by hand for one
// linear colour (0.18, 0.4, 0.3):
//
//	white balance (1.22, 1, 0.74): (0.2196, 0.4, 0.222)
//	luma Y = 0.2126*0.2196 + 0.7152*0.4 + 0.0722*0.222 = 0.3484704
//	saturation 0.65: Y + 0.65 (c - Y) = (0.26481838, 0.38207838, 0.26637838)
//	255 (0.04 + 0.96 x^(1/2.6)) = (157.048, 179.283, 157.380) -> (157, 179, 157)
func TestNewCamEncodeClosedForm(t *testing.T) {
	cam, _ := LookupCamera(CameraNewCam)
	b := cam.Balance([3]float64{0.18, 0.4, 0.3})
	for k, want := range []float64{0.26481838, 0.38207838, 0.26637838} {
		if math.Abs(b[k]-want) > 1e-7 {
			t.Errorf("balanced channel %d = %.8f, want %.8f", k, b[k], want)
		}
	}
	if got := cam.Encode([3]float64{0.18, 0.4, 0.3}); got != [3]uint8{157, 179, 157} {
		t.Errorf("Encode = %v, want [157 179 157]", got)
	}
	kitti, _ := LookupCamera(CameraKITTI)
	// sRGB of 0.18: 1.055 * 0.18^(1/2.4) - 0.055 = 0.46135 -> 117.6 -> 118
	if got := kitti.Encode([3]float64{0.18, 0.18, 0.18}); got != [3]uint8{118, 118, 118} {
		t.Errorf("KITTI Encode(0.18 grey) = %v, want 118", got)
	}
}

// A rendered sky pixel of the new camera, noise switched off, is the closed
// form of the sky's linear colour at that pixel's ray (within the one step
// the renderer's float32 arithmetic and its 2^16-entry table allow).
func TestNewCamColourOnAKnownPixel(t *testing.T) {
	cfg := Config{World: WorldOutdoor, Width: 320, Height: 96, Seed: 5, Camera: CameraNewCam}
	r, err := NewRenderer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.cam.ShotNoise, r.cam.ReadNoise = 0, 0
	f := NewFrame(cfg.Width, cfg.Height)
	if err := r.Render(3, f); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for v := 0; v < 10; v++ {
		for u := 0; u < cfg.Width; u += 7 {
			i := v*cfg.Width + u
			if f.Semantic[i] != ClassSky {
				continue
			}
			du := (float64(u) - r.cx) / r.fx
			sy := -(float64(v) - r.cy) / r.fy
			c := r.sky.color(du, sy, &r.sc)
			want := r.cam.Encode([3]float64{float64(c[0]), float64(c[1]), float64(c[2])})
			for k := range 3 {
				if d := int(f.RGB[3*i+k]) - int(want[k]); d < -1 || d > 1 {
					t.Fatalf("pixel (%d,%d) channel %d = %d, closed form %d", u, v, k, f.RGB[3*i+k], want[k])
				}
			}
			checked++
		}
	}
	if checked < 50 {
		t.Fatalf("only %d sky pixels checked", checked)
	}
}

func TestSensorNoiseMoments(t *testing.T) {
	const n = 200000
	var s, s2 float64
	for i := range n {
		x := float64(sensorNoise(77, i/1000, i%1000, i%3))
		s += x
		s2 += x * x
	}
	mean := s / n
	vr := s2/n - mean*mean
	// standard errors: 1/sqrt(n) = 0.0022 for the mean, sqrt(2/n) = 0.0032 for the variance
	if math.Abs(mean) > 0.01 || math.Abs(vr-1) > 0.015 {
		t.Errorf("noise mean %v variance %v, want 0 and 1", mean, vr)
	}
}

// The rendered noise has the model's variance: on sky pixels (known linear
// colour), the difference between a noisy and a noiseless render has, in
// 8-bit steps, the variance (255 dV/dx)^2 (ShotNoise x + ReadNoise^2) of the
// linearised transfer curve, plus about 2/12 from rounding both renders.
func TestNewCamNoiseVariance(t *testing.T) {
	cfg := Config{World: WorldOutdoor, Width: 320, Height: 96, Seed: 5, Camera: CameraNewCam}
	noisy, a := mustRender(t, cfg, 3)
	r, err := NewRenderer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.cam.ShotNoise, r.cam.ReadNoise = 0, 0
	b := NewFrame(cfg.Width, cfg.Height)
	if err := r.Render(3, b); err != nil {
		t.Fatal(err)
	}
	cam := noisy.cam
	var obs, pred float64
	n := 0
	for v := 0; v < cfg.Height; v++ {
		for u := 0; u < cfg.Width; u++ {
			i := v*cfg.Width + u
			if a.Semantic[i] != ClassSky {
				continue
			}
			du := (float64(u) - r.cx) / r.fx
			sy := -(float64(v) - r.cy) / r.fy
			c := r.sky.color(du, sy, &r.sc)
			x := cam.Balance([3]float64{float64(c[0]), float64(c[1]), float64(c[2])})
			for k := range 3 {
				sd := math.Sqrt(cam.ShotNoise*x[k] + cam.ReadNoise*cam.ReadNoise)
				if x[k]-4*sd < 0 || x[k]+4*sd > 1 {
					continue // clipped: the linearisation does not hold
				}
				slope := 255 * (1 - cam.Black) / cam.Gamma * math.Pow(x[k], 1/cam.Gamma-1)
				d := float64(a.RGB[3*i+k]) - float64(b.RGB[3*i+k])
				obs += d * d
				pred += slope*slope*sd*sd + 2.0/12
				n++
			}
		}
	}
	if n < 1000 {
		t.Fatalf("only %d sky samples", n)
	}
	ratio := obs / pred
	t.Logf("noise variance ratio observed/predicted %.3f over %d samples", ratio, n)
	if ratio < 0.85 || ratio > 1.15 {
		t.Errorf("noise variance %v observed against %v predicted over %d samples (ratio %v)", obs/float64(n), pred/float64(n), n, ratio)
	}
}

func TestNewCamDeterministicAndAllocationFree(t *testing.T) {
	cfg := Config{World: WorldOutdoor, Width: 160, Height: 48, Seed: 9, Camera: CameraNewCam}
	_, a := mustRender(t, cfg, 11)
	cfg1 := cfg
	cfg1.Parallelism = 1
	_, b := mustRender(t, cfg1, 11)
	if !bytes.Equal(a.RGB, b.RGB) {
		t.Fatal("same seed and index gave different new-camera frames")
	}
	_, c := mustRender(t, cfg, 12)
	if bytes.Equal(a.RGB, c.RGB) {
		t.Fatal("frames 11 and 12 are identical")
	}
	kcfg := cfg
	kcfg.Camera = ""
	_, k := mustRender(t, kcfg, 11)
	if bytes.Equal(a.RGB, k.RGB) {
		t.Fatal("the new camera renders the KITTI camera's bytes")
	}
	r, _ := NewRenderer(cfg)
	f := NewFrame(cfg.Width, cfg.Height)
	idx := 0
	if allocs := testing.AllocsPerRun(10, func() {
		if err := r.Render(idx, f); err != nil {
			t.Fatal(err)
		}
		idx += 5
	}); allocs != 0 {
		t.Errorf("%v allocations per new-camera frame", allocs)
	}
}
