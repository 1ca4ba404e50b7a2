package sim

import "math"

type primKind uint8

const (
	kindBox      primKind = iota // axis-aligned box
	kindCylinder                 // vertical cylinder: centre (px, pz), radius r, y in [y0, y1]
	kindSphere                   // sphere: centre (px, py, pz), radius r
)

// prim is one scene primitive. Boxes use the bounds; cylinders and spheres
// also keep the bounds (for shadows) next to their centre and radius.
type prim struct {
	kind                   primKind
	mat                    material
	class                  uint8
	casts                  bool // casts a shadow on the ground
	x0, y0, z0, x1, y1, z1 float64
	px, py, pz, r          float64
	// shadow footprint on the ground (conservative AABB), valid when casts
	sx0, sz0, sx1, sz1 float64
	col                [3]float32
	tex                uint32
	// material parameters (meaning per material)
	a, b, c float64
}

// cand is a primitive whose footprint the column's vertical plane crosses,
// with the ray-parameter interval of the crossing and the normal of the side
// face the column ray enters through.
type cand struct {
	p      int32
	t0, t1 float64
	nx, nz float32
}

// hit targets that are not primitives.
const (
	hitSky     int32 = -1
	hitGround  int32 = -2
	hitCeiling int32 = -3
)

type hit struct {
	t          float64
	idx        int32
	nx, ny, nz float32
}

// near is the closest distance (m) a ray may hit anything.
const near = 0.05

// scene is the geometry and light of one frame.
type scene struct {
	prims   []prim
	ceiling float64 // ceiling height (indoor); 0 = open sky
	// camera position
	ox, oy, oz float64
	// sun / key light direction (unit, pointing to the light)
	lx, ly, lz float64
}

func (sc *scene) add(p prim) {
	if len(sc.prims) == cap(sc.prims) {
		// Capacity is sized from the generators' per-segment maxima, and a
		// test checks that it is never reached; dropping keeps determinism.
		return
	}
	if p.casts && sc.ly > 0 {
		// Ground shadow: the footprint swept opposite the light up to the top.
		dx := -p.y1 * sc.lx / sc.ly
		dz := -p.y1 * sc.lz / sc.ly
		p.sx0, p.sx1 = math.Min(p.x0, p.x0+dx)-0.05, math.Max(p.x1, p.x1+dx)+0.05
		p.sz0, p.sz1 = math.Min(p.z0, p.z0+dz)-0.05, math.Max(p.z1, p.z1+dz)+0.05
	}
	sc.prims = append(sc.prims, p)
}

func (sc *scene) box(x0, y0, z0, x1, y1, z1 float64, mat material, class uint8, col [3]float32, tex uint32, casts bool) *prim {
	sc.add(prim{kind: kindBox, mat: mat, class: class, casts: casts,
		x0: x0, y0: y0, z0: z0, x1: x1, y1: y1, z1: z1, col: col, tex: tex})
	return &sc.prims[len(sc.prims)-1]
}

func (sc *scene) cylinder(px, pz, r, y0, y1 float64, mat material, class uint8, col [3]float32, tex uint32, casts bool) *prim {
	sc.add(prim{kind: kindCylinder, mat: mat, class: class, casts: casts,
		x0: px - r, y0: y0, z0: pz - r, x1: px + r, y1: y1, z1: pz + r,
		px: px, pz: pz, r: r, col: col, tex: tex})
	return &sc.prims[len(sc.prims)-1]
}

func (sc *scene) sphere(px, py, pz, r float64, mat material, class uint8, col [3]float32, tex uint32, casts bool) *prim {
	sc.add(prim{kind: kindSphere, mat: mat, class: class, casts: casts,
		x0: px - r, y0: py - r, z0: pz - r, x1: px + r, y1: py + r, z1: pz + r,
		px: px, py: py, pz: pz, r: r, col: col, tex: tex})
	return &sc.prims[len(sc.prims)-1]
}

// collect gathers the primitives (or, with shadows, the ground shadows of
// the casters) that the vertical plane of ray direction (du, *, 1) from the
// camera crosses, sorted by entry parameter.
func (sc *scene) collect(out []cand, du float64, shadows bool) []cand {
	ox, oz := sc.ox, sc.oz
	for i := range sc.prims {
		p := &sc.prims[i]
		var c cand
		if shadows {
			if !p.casts {
				continue
			}
			t0, t1, _, _, ok := slabXZ(ox, oz, du, p.sx0, p.sz0, p.sx1, p.sz1)
			if !ok {
				continue
			}
			c = cand{p: int32(i), t0: t0, t1: t1}
		} else if p.kind == kindBox {
			t0, t1, nx, nz, ok := slabXZ(ox, oz, du, p.x0, p.z0, p.x1, p.z1)
			if !ok {
				continue
			}
			c = cand{p: int32(i), t0: t0, t1: t1, nx: nx, nz: nz}
		} else {
			dx, dz := ox-p.px, oz-p.pz
			a := du*du + 1
			b := du*dx + dz
			cc := dx*dx + dz*dz - p.r*p.r
			disc := b*b - a*cc
			if disc < 0 {
				continue
			}
			s := math.Sqrt(disc)
			t0, t1 := (-b-s)/a, (-b+s)/a
			if t1 <= near {
				continue
			}
			c = cand{p: int32(i), t0: t0, t1: t1,
				nx: float32((ox + t0*du - p.px) / p.r), nz: float32((oz + t0 - p.pz) / p.r)}
		}
		// insertion sort by t0: lists are short
		out = append(out, c)
		j := len(out) - 1
		for j > 0 && out[j-1].t0 > c.t0 {
			out[j] = out[j-1]
			j--
		}
		out[j] = c
	}
	return out
}

// slabXZ intersects the 2D ray (ox + t*du, oz + t) with a rectangle.
func slabXZ(ox, oz, du, x0, z0, x1, z1 float64) (t0, t1 float64, nx, nz float32, ok bool) {
	tz0, tz1 := z0-oz, z1-oz
	var tx0, tx1 float64
	if du == 0 {
		if ox < x0 || ox > x1 {
			return 0, 0, 0, 0, false
		}
		tx0, tx1 = math.Inf(-1), math.Inf(1)
	} else {
		tx0, tx1 = (x0-ox)/du, (x1-ox)/du
		if tx0 > tx1 {
			tx0, tx1 = tx1, tx0
		}
	}
	t0, t1 = math.Max(tz0, tx0), math.Min(tz1, tx1)
	if t0 > t1 || t1 <= near {
		return 0, 0, 0, 0, false
	}
	if tz0 >= tx0 {
		nz = -1
	} else if du > 0 {
		nx = -1
	} else {
		nx = 1
	}
	return t0, t1, nx, nz, true
}

// trace finds the first surface along the ray from (ox, oy, oz) with
// direction (du, sy, 1) within cands (from collect with the same du), the
// ground plane y = 0 and the ceiling. The returned t is depth along z.
func (sc *scene) trace(cands []cand, du, oy, sy, tmax float64) hit {
	h := hit{t: tmax, idx: hitSky}
	if sy < 0 {
		if tg := -oy / sy; tg < h.t {
			h = hit{t: tg, idx: hitGround, ny: 1}
		}
	}
	if sc.ceiling > 0 && sy > 0 {
		if tc := (sc.ceiling - oy) / sy; tc < h.t {
			h = hit{t: tc, idx: hitCeiling, ny: -1}
		}
	}
	for i := range cands {
		c := &cands[i]
		if c.t0 >= h.t {
			break
		}
		p := &sc.prims[c.p]
		if p.kind == kindSphere {
			lx, ly, lz := sc.ox-p.px, oy-p.py, sc.oz-p.pz
			a := du*du + sy*sy + 1
			b := du*lx + sy*ly + lz
			cc := lx*lx + ly*ly + lz*lz - p.r*p.r
			disc := b*b - a*cc
			if disc < 0 {
				continue
			}
			t := (-b - math.Sqrt(disc)) / a
			if t <= near || t >= h.t {
				continue
			}
			inv := 1 / p.r
			h = hit{t: t, idx: c.p,
				nx: float32((lx + t*du) * inv), ny: float32((ly + t*sy) * inv), nz: float32((lz + t) * inv)}
			continue
		}
		enter, exit := c.t0, c.t1
		side := true
		if sy == 0 {
			if oy < p.y0 || oy > p.y1 {
				continue
			}
		} else {
			ta, tb := (p.y0-oy)/sy, (p.y1-oy)/sy
			if ta > tb {
				ta, tb = tb, ta
			}
			if ta > enter {
				enter, side = ta, false
			}
			if tb < exit {
				exit = tb
			}
			if enter > exit {
				continue
			}
		}
		if enter <= near || enter >= h.t {
			continue
		}
		h = hit{t: enter, idx: c.p}
		switch {
		case side:
			h.nx, h.nz = c.nx, c.nz
		case sy < 0:
			h.ny = 1
		default:
			h.ny = -1
		}
	}
	return h
}

// shadowed reports whether the point P (on the ray with parameter t of the
// column whose shadow candidates are shads) is hidden from the light.
func (sc *scene) shadowed(shads []cand, t, px, py, pz float64) bool {
	for i := range shads {
		c := &shads[i]
		if c.t0 > t {
			break
		}
		if t > c.t1 {
			continue
		}
		if sc.occludes(&sc.prims[c.p], px, py, pz) {
			return true
		}
	}
	return false
}

// occludes tests the ray P + s*L (s > 0) against the primitive.
func (sc *scene) occludes(p *prim, px, py, pz float64) bool {
	if p.kind == kindSphere {
		lx, ly, lz := px-p.px, py-p.py, pz-p.pz
		b := lx*sc.lx + ly*sc.ly + lz*sc.lz
		cc := lx*lx + ly*ly + lz*lz - p.r*p.r
		disc := b*b - cc
		return disc >= 0 && -b+math.Sqrt(disc) > 0
	}
	lo, hi := 1e-4, math.Inf(1)
	if !slab1(px, sc.lx, p.x0, p.x1, &lo, &hi) || !slab1(py, sc.ly, p.y0, p.y1, &lo, &hi) || !slab1(pz, sc.lz, p.z0, p.z1, &lo, &hi) {
		return false
	}
	return true
}

func slab1(o, d, a, b float64, lo, hi *float64) bool {
	if d == 0 {
		return o >= a && o <= b
	}
	t0, t1 := (a-o)/d, (b-o)/d
	if t0 > t1 {
		t0, t1 = t1, t0
	}
	if t0 > *lo {
		*lo = t0
	}
	if t1 < *hi {
		*hi = t1
	}
	return *lo <= *hi
}
