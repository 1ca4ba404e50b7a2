package sim

import "math"

// LiDAR model: a Velodyne HDL-64E-like scanner, 64 beams from +2.0 to
// -24.8 degrees elevation (an upper block of 32 beams at ~1/3 degree and a
// lower block of 32 at ~1/2 degree), azimuth step lidarAzimuthStep, 80 m
// range, mounted lidarHeight above the ground directly above the camera.
const (
	lidarBeams       = 64
	lidarAzimuthStep = 0.16 // degrees (HDL-64E at 10 Hz spins at ~0.17 degree steps)
	lidarMaxRange    = 80.0
	lidarHeight      = 1.73
	lidarDropout     = 0.03 // fraction of pulses with no return (absorbed / specular)
)

type lidarModel struct {
	tanElev [lidarBeams]float64
	// azimuth rays (as du = tan(azimuth)) sorted by the image column they
	// project to; colStart[u]..colStart[u+1] index the rays of column u.
	du       []float64
	ufrac    []float64 // continuous column of each ray
	colStart []int32
	keepX    float64 // half-width of the kept sub-pixel window (columns)
	keepY    float64 // half-height (rows)
}

func newLidarModel(w, h int, fx, fy, cx, cy float64) lidarModel {
	var m lidarModel
	for i := 0; i < 32; i++ {
		e := 2.0 + (-8.33-2.0)*float64(i)/31
		m.tanElev[i] = math.Tan(e * math.Pi / 180)
	}
	for i := 0; i < 32; i++ {
		e := -8.83 + (-24.8+8.83)*float64(i)/31
		m.tanElev[32+i] = math.Tan(e * math.Pi / 180)
	}
	aMin := math.Atan((-0.5 - cx) / fx)
	aMax := math.Atan((float64(w) - 0.5 - cx) / fx)
	step := lidarAzimuthStep * math.Pi / 180
	m.colStart = make([]int32, w+1)
	j0, j1 := int(math.Ceil(aMin/step)), int(math.Floor(aMax/step))
	for j := j0; j <= j1; j++ {
		du := math.Tan(float64(j) * step)
		u := cx + fx*du
		ui := int(math.Round(u))
		if ui < 0 || ui >= w {
			continue
		}
		m.du = append(m.du, du)
		m.ufrac = append(m.ufrac, u)
		m.colStart[ui+1]++
	}
	for u := 0; u < w; u++ {
		m.colStart[u+1] += m.colStart[u]
	}
	// KITTI's scans are annotated at 1242x375. At a smaller output size a
	// scan point survives only if it falls in the part of its output pixel
	// that nearest-neighbour resizing of the native map samples, which keeps
	// the pixel density of the projected scan at KITTI's level.
	m.keepX = 0.5 * math.Min(1, float64(w)/KITTIWidth)
	m.keepY = 0.5 * math.Min(1, float64(h)/KITTIHeight)
	return m
}

// lidarColumn casts the LiDAR rays that project into column u and writes
// their returns into the frame's sparse map. Points are cleaned like KITTI's
// annotated depth maps: a return is dropped where the camera sees the sky or
// a surface more than 10% nearer or farther (LiDAR-camera parallax).
func (r *Renderer) lidarColumn(wk *worker, u int) {
	m := &r.lidar
	f := r.frame
	sc := &r.sc
	W, H := r.cfg.Width, r.cfg.Height
	oy := sc.oy - outdoorCameraHeight + lidarHeight
	seed := uint32(r.cfg.Seed)
	for j := m.colStart[u]; j < m.colStart[u+1]; j++ {
		if math.Abs(m.ufrac[j]-float64(u)) > m.keepX {
			continue
		}
		du := m.du[j]
		wk.lcands = sc.collect(wk.lcands[:0], du, false)
		hlen := math.Sqrt(1 + du*du)
		for b := 0; b < lidarBeams; b++ {
			sy := m.tanElev[b] * hlen
			// range = t * sqrt(1 + du^2 + sy^2)
			tmax := lidarMaxRange / math.Sqrt(1+du*du+sy*sy)
			h := sc.trace(wk.lcands, du, oy, sy, tmax)
			if h.idx == hitSky {
				continue
			}
			if unit(hash3(uint32(f.Index), uint32(j)*64+uint32(b), seed)) < lidarDropout {
				continue
			}
			y := oy + h.t*sy
			v := r.cy + r.fy*(sc.oy-y)/h.t
			vi := math.Round(v)
			if vi < 0 || vi >= float64(H) || math.Abs(v-vi) > m.keepY {
				continue
			}
			i := int(vi)*W + u
			d := float64(f.Depth[i])
			if d == 0 || math.Abs(h.t-d) > 0.1*d {
				continue
			}
			if s := f.Sparse[i]; s == 0 || float32(h.t) < s {
				f.Sparse[i] = float32(h.t)
			}
		}
	}
}
