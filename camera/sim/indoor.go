package sim

import "math"

// Indoor world: a sequence of furnished rooms. The camera (a robot-height
// camera with the same KITTI-like intrinsics as outdoors) spends
// framesPerRoom frames in each room, creeping forward.
const (
	framesPerRoom   = 60
	indoorStep      = 0.02 // metres per frame
	maxIndoorPrims  = 192
	kinectMaxRange  = 10.0
	kinectDropout   = 0.02
	kinectEdgeRatio = 0.03
)

type indoorWorld struct {
	seed uint64
	cur  room // the room of the frame being rendered (set by build)
}

func newIndoorWorld(seed int64) indoorWorld { return indoorWorld{seed: uint64(seed)} }

// room holds the parameters of one room.
type room struct {
	w, d, h    float64 // width, far-wall distance from the start, height
	camX, camH float64
	floorKind  int
	floorCol   [3]float32
	wallCol    [3]float32
	plank      float64
	tex        uint32
}

func (w *indoorWorld) room(r int) room {
	g := newRNG(w.seed, uint64(r), 0x200)
	rm := room{
		w: g.rangeF(3.8, 6.5),
		d: g.rangeF(6.0, 9.3),
		h: g.rangeF(2.5, 3.1),
	}
	rm.camX = g.rangeF(-(rm.w/2 - 1.3), rm.w/2-1.3)
	rm.camH = g.rangeF(1.0, 1.35)
	rm.floorKind = g.intn(3)
	floors := [...][3]float32{{0.45, 0.30, 0.17}, {0.62, 0.60, 0.56}, {0.35, 0.33, 0.38}}
	rm.floorCol = floors[rm.floorKind]
	if rm.floorKind == 0 {
		rm.floorCol = scale3(rm.floorCol, float32(g.rangeF(0.7, 1.3)))
	}
	walls := [...][3]float32{{0.85, 0.83, 0.78}, {0.78, 0.80, 0.82}, {0.82, 0.74, 0.62}, {0.62, 0.72, 0.66}, {0.88, 0.86, 0.84}, {0.70, 0.60, 0.55}}
	rm.wallCol = walls[g.intn(len(walls))]
	rm.plank = g.rangeF(0.12, 0.2)
	rm.tex = uint32(g.next())
	return rm
}

func (w *indoorWorld) cameraHeight(index int) float64 { return w.room(index / framesPerRoom).camH }

var furnitureWood = [...][3]float32{{0.45, 0.30, 0.18}, {0.62, 0.48, 0.32}, {0.25, 0.17, 0.11}, {0.8, 0.78, 0.74}, {0.2, 0.2, 0.22}}
var fabricColors = [...][3]float32{{0.35, 0.38, 0.45}, {0.55, 0.2, 0.18}, {0.6, 0.58, 0.5}, {0.25, 0.35, 0.25}, {0.15, 0.15, 0.17}, {0.7, 0.66, 0.6}}

func (w *indoorWorld) build(index int, sc *scene) {
	r := index / framesPerRoom
	j := index % framesPerRoom
	rm := w.room(r)
	w.cur = rm
	sc.ox = rm.camX + 0.12*math.Sin(float64(j)*0.08)
	sc.oy = rm.camH
	sc.oz = float64(j) * indoorStep
	sc.ceiling = rm.h
	hw := rm.w / 2
	const th = 0.2
	wall := func(x0, z0, x1, z1 float64) {
		sc.box(x0, 0, z0, x1, rm.h, z1, matWall, ClassNYUWall, rm.wallCol, rm.tex, false)
	}
	wall(-hw-th, -3, -hw, rm.d+th)
	wall(hw, -3, hw+th, rm.d+th)
	wall(-hw-th, rm.d, hw+th, rm.d+th)

	g := newRNG(w.seed, uint64(r), 0x201)
	zFree := float64(framesPerRoom)*indoorStep + 0.6 // nothing nearer than this to the start
	// wall fixtures: a door, windows, pictures
	dx := g.rangeF(-hw+0.3, hw-1.2)
	if g.chance(0.5) {
		sc.box(dx, 0, rm.d-0.04, dx+0.9, 2.05, rm.d, matDoor, ClassNYUDoor, furnitureWood[g.intn(len(furnitureWood))], uint32(g.next()), false)
	} else {
		side := float64(1 - 2*g.intn(2))
		z := g.rangeF(zFree+0.5, rm.d-1.2)
		sc.box(math.Min(side*hw, side*(hw-0.04)), 0, z, math.Max(side*hw, side*(hw-0.04)), 2.05, z+0.9, matDoor, ClassNYUDoor, furnitureWood[g.intn(len(furnitureWood))], uint32(g.next()), false)
	}
	if g.chance(0.7) {
		ww := g.rangeF(1.0, 2.0)
		x := g.rangeF(-hw+0.3, hw-0.3-ww)
		if x+ww < dx || x > dx+0.9 {
			sc.box(x, 0.85, rm.d-0.03, x+ww, math.Min(rm.h-0.3, 2.3), rm.d, matWindow, ClassNYUWindow, [3]float32{0.9, 0.9, 0.88}, uint32(g.next()), false)
		}
	}
	if g.chance(0.6) {
		side := float64(1 - 2*g.intn(2))
		z := g.rangeF(zFree, rm.d-2.2)
		sc.box(math.Min(side*hw, side*(hw-0.03)), 0.85, z, math.Max(side*hw, side*(hw-0.03)), math.Min(rm.h-0.3, 2.3), z+g.rangeF(1.0, 1.8), matWindow, ClassNYUWindow, [3]float32{0.9, 0.9, 0.88}, uint32(g.next()), false)
	}
	for n := g.intn(3); n > 0; n-- {
		side := float64(1 - 2*g.intn(2))
		z := g.rangeF(zFree, rm.d-1.2)
		pw, ph := g.rangeF(0.4, 1.0), g.rangeF(0.3, 0.8)
		y := g.rangeF(1.3, math.Min(rm.h-0.3, 2.1)-ph/2)
		sc.box(math.Min(side*hw, side*(hw-0.03)), y-ph/2, z, math.Max(side*hw, side*(hw-0.03)), y+ph/2, z+pw, matPicture, ClassNYUPicture, [3]float32{0.2, 0.15, 0.1}, uint32(g.next()), false)
	}
	// furniture against the walls and in the room, without overlaps
	var placed [16][4]float64
	np := 0
	free := func(x0, z0, x1, z1 float64) bool {
		for i := 0; i < np; i++ {
			p := placed[i]
			if x0 < p[2]+0.1 && x1 > p[0]-0.1 && z0 < p[3]+0.1 && z1 > p[1]-0.1 {
				return false
			}
		}
		return true
	}
	items := 5 + g.intn(5)
	for it := 0; it < items && np < len(placed); it++ {
		kind := g.intn(10)
		fw, fd := furnitureSize(kind, &g)
		var x0, z0 float64
		ok := false
		for try := 0; try < 8 && !ok; try++ {
			place := g.intn(3)
			if place == 2 && kind != 0 && kind != 1 && kind != 6 && kind != 7 && kind != 8 {
				place = g.intn(2) // big furniture stands against a wall
			}
			switch place {
			case 0: // against the far wall
				x0, z0 = g.rangeF(-hw+0.05, hw-0.05-fw), rm.d-fd-0.02
			case 1: // against a side wall, rotated so the front faces the room
				fw, fd = fd, fw
				if g.chance(0.5) {
					x0 = -hw + 0.02
				} else {
					x0 = hw - 0.02 - fw
				}
				z0 = g.rangeF(zFree, math.Max(zFree, rm.d-fd-0.05))
			default: // free standing
				x0, z0 = g.rangeF(-hw+0.6, hw-0.6-fw), g.rangeF(zFree+0.4, math.Max(zFree+0.4, rm.d-fd-0.8))
			}
			ok = x0 >= -hw && x0+fw <= hw && z0 >= zFree && z0+fd <= rm.d && free(x0, z0, x0+fw, z0+fd)
		}
		if !ok {
			continue
		}
		placed[np] = [4]float64{x0, z0, x0 + fw, z0 + fd}
		np++
		w.furniture(kind, &g, x0, z0, fw, fd, rm, sc)
	}
}

func furnitureSize(kind int, g *rng) (w, d float64) {
	switch kind {
	case 0: // table
		return g.rangeF(1.0, 1.8), g.rangeF(0.7, 1.0)
	case 1: // chair
		return 0.45, 0.45
	case 2: // sofa
		return g.rangeF(1.6, 2.3), 0.9
	case 3: // bed
		return g.rangeF(1.4, 1.8), 2.0
	case 4: // bookshelf
		return g.rangeF(0.8, 1.6), 0.35
	case 5: // cabinet (maybe with a TV)
		return g.rangeF(0.9, 1.7), 0.45
	case 6: // floor lamp
		return 0.4, 0.4
	case 7: // plant
		return 0.6, 0.6
	case 8: // rug
		return g.rangeF(1.4, 2.4), g.rangeF(1.0, 1.8)
	default: // wardrobe
		return g.rangeF(0.9, 1.6), 0.6
	}
}

func (w *indoorWorld) furniture(kind int, g *rng, x0, z0, fw, fd float64, rm room, sc *scene) {
	x1, z1 := x0+fw, z0+fd
	wood := furnitureWood[g.intn(len(furnitureWood))]
	cloth := fabricColors[g.intn(len(fabricColors))]
	tex := uint32(g.next())
	legs := func(h, t float64, class uint8) {
		sc.box(x0+0.03, 0, z0+0.03, x0+0.03+t, h, z0+0.03+t, matWood, class, wood, tex, false)
		sc.box(x1-0.03-t, 0, z0+0.03, x1-0.03, h, z0+0.03+t, matWood, class, wood, tex, false)
		sc.box(x0+0.03, 0, z1-0.03-t, x0+0.03+t, h, z1-0.03, matWood, class, wood, tex, false)
		sc.box(x1-0.03-t, 0, z1-0.03-t, x1-0.03, h, z1-0.03, matWood, class, wood, tex, false)
	}
	switch kind {
	case 0:
		h := g.rangeF(0.72, 0.77)
		sc.box(x0, h-0.04, z0, x1, h, z1, matWood, ClassNYUTable, wood, tex, false)
		legs(h-0.04, 0.05, ClassNYUTable)
	case 1:
		sc.box(x0, 0.42, z0, x1, 0.47, z1, matWood, ClassNYUChair, wood, tex, false)
		legs(0.42, 0.04, ClassNYUChair)
		sc.box(x0, 0.47, z1-0.05, x1, 0.92, z1, matWood, ClassNYUChair, wood, tex, false)
	case 2:
		sc.box(x0, 0.08, z0, x1, 0.42, z1, matFabric, ClassNYUSofa, cloth, tex, false)
		sc.box(x0, 0.42, z1-0.22, x1, 0.85, z1, matFabric, ClassNYUSofa, cloth, tex, false)
		sc.box(x0, 0.42, z0, x0+0.18, 0.62, z1-0.22, matFabric, ClassNYUSofa, cloth, tex, false)
		sc.box(x1-0.18, 0.42, z0, x1, 0.62, z1-0.22, matFabric, ClassNYUSofa, cloth, tex, false)
	case 3:
		sc.box(x0, 0, z0, x1, 0.5, z1, matFabric, ClassNYUBed, cloth, tex, false)
		sc.box(x0, 0, z1-0.06, x1, 1.1, z1, matWood, ClassNYUBed, wood, tex, false)
		sc.box(x0+0.15, 0.5, z1-0.55, x1-0.15, 0.64, z1-0.15, matPillow, ClassNYUBed, [3]float32{0.88, 0.88, 0.86}, tex, false)
	case 4:
		h := math.Min(rm.h-0.2, g.rangeF(1.6, 2.2))
		p := sc.box(x0, 0, z0, x1, h, z1, matShelf, ClassNYUBookshelf, wood, tex, false)
		p.a = g.rangeF(0.32, 0.42)
	case 5:
		h := g.rangeF(0.5, 1.0)
		p := sc.box(x0, 0, z0, x1, h, z1, matWood, ClassNYUCabinet, wood, tex, false)
		p.a = 1 // drawers
		if g.chance(0.6) && math.Max(fw, fd) > 1.0 {
			// the screen runs along the cabinet's long side
			long := math.Max(fw, fd)
			tw := math.Min(long-0.1, g.rangeF(0.9, 1.3))
			cx, cz := (x0+x1)/2, (z0+z1)/2
			hx, hz := tw/2, 0.03
			if fd > fw {
				hx, hz = hz, hx
			}
			sc.box(cx-hx, h+0.05, cz-hz, cx+hx, h+0.05+tw*0.58, cz+hz, matScreen, ClassNYUTelevision, [3]float32{0.03, 0.03, 0.035}, tex, false)
			sc.box(cx-0.12, h, cz-0.1, cx+0.12, h+0.05, cz+0.1, matMetal, ClassNYUTelevision, [3]float32{0.1, 0.1, 0.1}, tex, false)
		}
	case 6:
		cx, cz := (x0+x1)/2, (z0+z1)/2
		sc.cylinder(cx, cz, 0.15, 0, 0.04, matMetal, ClassNYULamp, [3]float32{0.2, 0.2, 0.2}, tex, false)
		sc.cylinder(cx, cz, 0.02, 0, 1.4, matMetal, ClassNYULamp, [3]float32{0.3, 0.3, 0.3}, tex, false)
		sc.cylinder(cx, cz, 0.2, 1.35, 1.65, matLampShade, ClassNYULamp, [3]float32{0.9, 0.85, 0.7}, tex, false)
	case 7:
		cx, cz := (x0+x1)/2, (z0+z1)/2
		sc.cylinder(cx, cz, 0.17, 0, 0.35, matPot, ClassNYUOtherProp, [3]float32{0.55, 0.3, 0.2}, tex, false)
		r := g.rangeF(0.3, 0.42)
		sc.sphere(cx, 0.35+r*0.9, cz, r, matPlant, ClassNYUOtherProp, [3]float32{0.12, 0.28, 0.08}, tex, false)
	case 8:
		sc.box(x0, 0, z0, x1, 0.012, z1, matRug, ClassNYUFloorMat, cloth, tex, false)
	default:
		h := math.Min(rm.h-0.15, g.rangeF(1.8, 2.2))
		p := sc.box(x0, 0, z0, x1, h, z1, matWood, ClassNYUCabinet, wood, tex, false)
		p.a = 2 // doors
	}
}

// structuredLight fills f.Sparse like a Kinect depth map: dense except for
// the projector's shadow at occlusion edges (left of a nearer surface), no
// return from glass and screens, beyond 10 m, and 2% speckle dropout.
func (w *indoorWorld) structuredLight(f *Frame, seed int64, index int) {
	W, H := f.Width, f.Height
	for v := 0; v < H; v++ {
		row := v * W
		for u := 0; u < W; u++ {
			i := row + u
			d := f.Depth[i]
			f.Sparse[i] = 0
			if d == 0 || d > kinectMaxRange {
				continue
			}
			switch f.Semantic[i] {
			case ClassNYUWindow, ClassNYUTelevision:
				continue
			}
			hole := false
			for k := 1; k <= 2 && u+k < W; k++ {
				if n := f.Depth[i+k]; n > 0 && n < d*(1-kinectEdgeRatio) {
					hole = true
				}
			}
			if hole || unit(hash3(uint32(index), uint32(i), uint32(seed)^0x4B1)) < kinectDropout {
				continue
			}
			f.Sparse[i] = d
		}
	}
}
