package sim

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// Renderer renders frames of one world. A Renderer is not safe for
// concurrent use: call Render from one goroutine at a time (it parallelises
// internally over Config.Parallelism goroutines). Use one Renderer per
// goroutine to render in parallel.
type Renderer struct {
	cfg            Config
	fx, fy, cx, cy float64
	outdoor        bool
	out            outdoorWorld
	in             indoorWorld
	sc             scene
	lidar          lidarModel
	sky            skyModel
	workers        []worker
	gamma          [gammaSize]uint8
	// cam is the camera model; plain is set when its pipeline is the
	// sRGB curve alone (the KITTI camera), encodeLUT tabulates its transfer
	// curve otherwise.
	cam       Camera
	plain     bool
	encodeLUT []uint8
	noiseSeed uint32

	// per-Render dispatch state, read by the worker goroutines
	frame  *Frame
	nextID atomic.Int32
	wg     sync.WaitGroup
	workFn func()
}

// worker holds one goroutine's scratch space.
type worker struct {
	cands  []cand
	shads  []cand
	lcands []cand
}

const gammaSize = 4096

// gammaMax is the linear value mapped to 255.
const gammaMax = 1.0

// NewRenderer validates cfg and prepares a renderer.
func NewRenderer(cfg Config) (*Renderer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Renderer{cfg: cfg, outdoor: cfg.World == WorldOutdoor}
	r.fx, r.fy, r.cx, r.cy = cfg.intrinsics()
	r.cam, _ = LookupCamera(cfg.Camera) // validated
	r.plain = r.cam.identity() && r.cam.Gamma == 0
	if !r.plain {
		r.encodeLUT = r.cam.newEncodeLUT()
		r.noiseSeed = hash3(uint32(cfg.Seed), uint32(uint64(cfg.Seed)>>32), 0x5E45)
	}
	var capPrims int
	if r.outdoor {
		r.out = newOutdoorWorld(cfg.Seed)
		if cfg.Obstacles {
			r.out.obstacles, r.out.lead = true, false
		}
		capPrims = r.out.maxPrims()
		r.lidar = newLidarModel(cfg.Width, cfg.Height, r.fx, r.fy, r.cx, r.cy)
	} else {
		r.in = newIndoorWorld(cfg.Seed)
		capPrims = maxIndoorPrims
	}
	r.sky = newSkyModel(cfg.Seed, r.outdoor)
	r.sc.prims = make([]prim, 0, capPrims)
	r.workers = make([]worker, cfg.workers())
	for i := range r.workers {
		r.workers[i] = worker{
			cands:  make([]cand, 0, capPrims),
			shads:  make([]cand, 0, capPrims),
			lcands: make([]cand, 0, capPrims),
		}
	}
	for i := range r.gamma {
		x := float64(i) / (gammaSize - 1) * gammaMax
		// sRGB transfer function
		var s float64
		if x <= 0.0031308 {
			s = 12.92 * x
		} else {
			s = 1.055*math.Pow(x, 1/2.4) - 0.055
		}
		r.gamma[i] = uint8(math.Min(255, math.Round(s*255)))
	}
	r.workFn = func() {
		id := int(r.nextID.Add(1))
		r.renderShare(id)
		r.wg.Done()
	}
	return r, nil
}

// Config returns the renderer's configuration.
func (r *Renderer) Config() Config { return r.cfg }

// Intrinsics returns the pinhole intrinsics in pixels for the output size
// (pixel centres at integer coordinates).
func (r *Renderer) Intrinsics() (fx, fy, cx, cy float64) { return r.fx, r.fy, r.cx, r.cy }

// CameraHeight is the height of the optical centre above the ground (floor)
// in frame index (it varies per room indoors).
func (r *Renderer) CameraHeight(index int) float64 {
	if r.outdoor {
		return outdoorCameraHeight
	}
	return r.in.cameraHeight(index)
}

// Render renders frame index of the sequence into f, which must have been
// made by NewFrame with the renderer's size. It allocates nothing.
func (r *Renderer) Render(index int, f *Frame) error {
	w, h := r.cfg.Width, r.cfg.Height
	if f == nil || f.Width != w || f.Height != h {
		return fmt.Errorf("sim render: frame size does not match the renderer's %dx%d", w, h)
	}
	n := w * h
	if len(f.RGB) != 3*n || len(f.Depth) != n || len(f.Sparse) != n || len(f.Semantic) != n {
		return fmt.Errorf("sim render: frame buffers do not have %dx%d entries", w, h)
	}
	if index < 0 {
		return fmt.Errorf("sim render: frame index %d is negative", index)
	}
	r.sc.prims = r.sc.prims[:0]
	r.sc.lx, r.sc.ly, r.sc.lz = r.sky.lx, r.sky.ly, r.sky.lz
	if r.outdoor {
		r.out.build(index, &r.sc)
	} else {
		r.in.build(index, &r.sc)
	}
	f.Index = index
	r.frame = f
	r.nextID.Store(0)
	nw := len(r.workers)
	r.wg.Add(nw - 1)
	for i := 1; i < nw; i++ {
		go r.workFn()
	}
	r.renderShare(0)
	r.wg.Wait()
	if !r.outdoor {
		r.in.structuredLight(f, r.cfg.Seed, index)
	}
	r.frame = nil
	return nil
}

// columnBlock is the width of the column stripes the workers interleave.
const columnBlock = 8

func (r *Renderer) renderShare(id int) {
	wk := &r.workers[id]
	nw := len(r.workers)
	W := r.cfg.Width
	for b := id * columnBlock; b < W; b += nw * columnBlock {
		end := min(b+columnBlock, W)
		for u := b; u < end; u++ {
			r.renderColumn(wk, u)
		}
	}
}

func (r *Renderer) renderColumn(wk *worker, u int) {
	f := r.frame
	sc := &r.sc
	W, H := r.cfg.Width, r.cfg.Height
	du := (float64(u) - r.cx) / r.fx
	wk.cands = sc.collect(wk.cands[:0], du, false)
	if r.outdoor {
		wk.shads = sc.collect(wk.shads[:0], du, true)
	}
	// metres per pixel per metre of depth
	fpPerT := 1 / r.fx
	fog := float64(r.cfg.Fog)
	for v := 0; v < H; v++ {
		sy := -(float64(v) - r.cy) / r.fy
		h := sc.trace(wk.cands, du, sc.oy, sy, math.Inf(1))
		i := v*W + u
		f.Sparse[i] = 0
		var c [3]float32
		if h.idx == hitSky {
			f.Depth[i] = 0
			f.Semantic[i] = ClassSky
			c = r.sky.color(du, sy, sc)
		} else {
			f.Depth[i] = float32(h.t)
			px, py, pz := sc.ox+h.t*du, sc.oy+h.t*sy, sc.oz+h.t
			var s surface
			if r.outdoor {
				s = r.out.shade(sc, &h, px, py, pz, h.t*fpPerT)
			} else {
				s = r.in.shade(sc, &h, px, py, pz, h.t*fpPerT)
			}
			f.Semantic[i] = s.class
			c = r.light(wk, &h, &s, px, py, pz, du, sy)
			k := fog + r.sky.haze
			if k > 0 {
				a := float32(math.Exp(-k * h.t))
				hz := r.sky.hazeCol
				c[0] = c[0]*a + hz[0]*(1-a)
				c[1] = c[1]*a + hz[1]*(1-a)
				c[2] = c[2]*a + hz[2]*(1-a)
			}
		}
		if r.plain {
			f.RGB[3*i] = r.toSRGB(c[0])
			f.RGB[3*i+1] = r.toSRGB(c[1])
			f.RGB[3*i+2] = r.toSRGB(c[2])
		} else {
			r.encodeCamera(c, f.Index, i, f.RGB[3*i:3*i+3:3*i+3])
		}
	}
	if r.outdoor {
		r.lidarColumn(wk, u)
	}
}

// surface is the material response at a hit.
type surface struct {
	albedo [3]float32
	class  uint8
	// nx, ny, nz perturb the geometric normal (bump), added before lighting
	bx, by, bz float32
	spec       float32 // mirror-like reflection of the sky (glass, paint)
	emit       float32 // self-lit fraction (lamps, screens, windows seen from inside)
	ao         float32 // ambient occlusion factor in [0,1], 0 = none
	receives   bool    // receives cast shadows (ground-level surfaces)
}

func (r *Renderer) light(wk *worker, h *hit, s *surface, px, py, pz, du, sy float64) [3]float32 {
	sc := &r.sc
	nx, ny, nz := h.nx+s.bx, h.ny+s.by, h.nz+s.bz
	if s.bx != 0 || s.by != 0 || s.bz != 0 {
		inv := 1 / float32(math.Sqrt(float64(nx*nx+ny*ny+nz*nz)))
		nx, ny, nz = nx*inv, ny*inv, nz*inv
	}
	ndl := nx*float32(sc.lx) + ny*float32(sc.ly) + nz*float32(sc.lz)
	if ndl < 0 {
		ndl = 0
	}
	if ndl > 0 && s.receives && r.outdoor && sc.shadowed(wk.shads, h.t, px, py, pz) {
		ndl = 0
	}
	sk := &r.sky
	// hemispherical ambient: brighter from above
	hemi := 0.65 + 0.35*ny
	if !r.outdoor {
		// indoor light bounces off every wall: a flatter hemisphere
		hemi = 0.85 + 0.15*ny
	}
	ao := 1 - s.ao
	var c [3]float32
	for k := 0; k < 3; k++ {
		l := sk.ambient[k]*hemi*ao + sk.sun[k]*ndl
		c[k] = s.albedo[k]*l + s.emit*s.albedo[k]
	}
	if s.spec > 0 {
		// reflect the view ray about the normal and look up the sky colour
		ilen := float32(1 / math.Sqrt(du*du+sy*sy+1))
		dx, dy, dz := float32(du)*ilen, float32(sy)*ilen, ilen
		d := dx*nx + dy*ny + dz*nz
		ry := dy - 2*d*ny // only the reflected elevation matters for the sky gradient
		fres := s.spec * (0.35 + 0.65*(1+d)*(1+d)*(1+d)*(1+d)*(1+d))
		if fres > 1 {
			fres = 1
		}
		refl := sk.gradient(ry)
		for k := 0; k < 3; k++ {
			c[k] = c[k]*(1-fres) + refl[k]*fres
		}
	}
	return c
}

func (r *Renderer) toSRGB(x float32) uint8 {
	i := int(x * (gammaSize - 1) / gammaMax)
	if i < 0 {
		i = 0
	} else if i >= gammaSize {
		i = gammaSize - 1
	}
	return r.gamma[i]
}

// encodeCamera runs the camera's colour pipeline (see Camera) on the
// linear colour c of pixel i of frame index and writes the three bytes.
func (r *Renderer) encodeCamera(c [3]float32, index, i int, out []uint8) {
	cam := &r.cam
	b0 := float32(cam.Gains[0]) * c[0]
	b1 := float32(cam.Gains[1]) * c[1]
	b2 := float32(cam.Gains[2]) * c[2]
	y := 0.2126*b0 + 0.7152*b1 + 0.0722*b2
	sat := float32(cam.Saturation)
	b := [3]float32{y + sat*(b0-y), y + sat*(b1-y), y + sat*(b2-y)}
	shot, read2 := float32(cam.ShotNoise), float32(cam.ReadNoise*cam.ReadNoise)
	for k := range 3 {
		x := b[k]
		if x < 0 {
			x = 0
		}
		if shot > 0 || read2 > 0 {
			sd := float32(math.Sqrt(float64(shot*x + read2)))
			x += sd * sensorNoise(r.noiseSeed, index, i, k)
			if x < 0 {
				x = 0
			}
		}
		j := int(x*(encodeLUTSize-1) + 0.5)
		if j >= encodeLUTSize {
			j = encodeLUTSize - 1
		}
		out[k] = r.encodeLUT[j]
	}
}

// RGBSource renders a world's frames as interleaved RGB8 (the frame
// source of an RTSP server: camera/rtspserver.FrameSource). It is used
// from one goroutine.
type RGBSource struct {
	r *Renderer
	f *Frame
}

// NewRGBSource opens a renderer of cfg as an RGB frame source.
func NewRGBSource(cfg Config) (*RGBSource, error) {
	r, err := NewRenderer(cfg)
	if err != nil {
		return nil, err
	}
	c := r.Config()
	return &RGBSource{r: r, f: NewFrame(c.Width, c.Height)}, nil
}

// Size is the frame's width and height.
func (s *RGBSource) Size() (int, int) { return s.f.Width, s.f.Height }

// Render renders frame index into rgb (3*width*height bytes).
func (s *RGBSource) Render(index int, rgb []uint8) error {
	if err := s.r.Render(index, s.f); err != nil {
		return err
	}
	copy(rgb, s.f.RGB)
	return nil
}
