package sim

import "math"

// Outdoor world constants (metres).
const (
	outdoorCameraHeight = 1.65 // KITTI camera height above the road
	segLen              = 10.0 // the road is generated in segments of this length
	viewAhead           = 160.0
	viewBehind          = 12.0
	sidewalkHeight      = 0.15
	maxSegmentPrims     = 96 // upper bound of prims one segment emits (both sides)
	maxMovingCars       = 16
	carPrims            = 6
)

type material uint8

const (
	matSidewalk material = iota
	matFacade
	matFence
	matHedge
	matConcrete
	matPole
	matSign
	matFoliage
	matBark
	matCarBody
	matCarCabin
	matTyre
	matPersonBody
	matPersonHead
	// indoor
	matWall
	matWood
	matFabric
	matMetal
	matScreen
	matShelf
	matPicture
	matRug
	matDoor
	matWindow
	matLampShade
	matPot
	matPlant
	matPillow
)

// outdoorWorld holds the per-seed parameters of the road world.
type outdoorWorld struct {
	seed       uint64
	laneW      float64 // lane width
	parkW      float64 // parking strip
	sideW      float64 // sidewalk width
	roadHalf   float64
	speed      float64 // metres per frame
	swayPhase  float64
	asphalt    float32
	lightEvery int
	lead       bool
	oncoming   float64 // probability of a car per oncoming slot
	onSpeed    float64
	buildingP  float64
	obstacles  bool // Config.Obstacles
}

// Obstacles on the ego lane (Config.Obstacles).
const (
	obstacleEvery    = 35.0 // metres of road between two obstacles
	maxObstaclePrims = 8    // prims of one obstacle
)

func newOutdoorWorld(seed int64) outdoorWorld {
	g := newRNG(uint64(seed), 0x0D)
	w := outdoorWorld{seed: uint64(seed)}
	w.laneW = g.rangeF(3.0, 3.5)
	w.parkW = g.rangeF(2.1, 2.5)
	w.sideW = g.rangeF(2.0, 3.6)
	w.roadHalf = w.laneW + w.parkW
	w.speed = g.rangeF(0.8, 1.2) // ~10 m/s at 10 Hz
	w.swayPhase = g.rangeF(0, 2*math.Pi)
	w.asphalt = float32(g.rangeF(0.16, 0.24))
	w.lightEvery = 2 + g.intn(3)
	w.lead = g.chance(0.5)
	w.oncoming = g.rangeF(0.2, 0.6)
	w.onSpeed = g.rangeF(0.8, 1.3)
	w.buildingP = g.rangeF(0.35, 0.8)
	return w
}

func (w *outdoorWorld) maxPrims() int {
	segs := int(math.Ceil((viewAhead+viewBehind)/segLen)) + 2
	n := segs*maxSegmentPrims + maxMovingCars*carPrims
	if w.obstacles {
		n += (int(math.Ceil(viewAhead/obstacleEvery)) + 2) * maxObstaclePrims
	}
	return n
}

func (w *outdoorWorld) cameraZ(index int) float64 { return float64(index) * w.speed }

// build places the camera and the primitives visible in frame index.
func (w *outdoorWorld) build(index int, sc *scene) {
	camZ := w.cameraZ(index)
	sc.ox = w.laneW/2 + 0.18*math.Sin(float64(index)*0.021+w.swayPhase)
	sc.oy = outdoorCameraHeight
	sc.oz = camZ
	sc.ceiling = 0
	k0 := int(math.Floor((camZ - viewBehind) / segLen))
	k1 := int(math.Floor((camZ + viewAhead) / segLen))
	for k := k0; k <= k1; k++ {
		w.segment(k, sc)
	}
	w.traffic(index, camZ, sc)
	if w.obstacles {
		w.obstaclesAhead(camZ, sc)
	}
}

// obstaclesAhead places the ego-lane obstacles between 2 m and viewAhead
// in front of the camera: even slots a pile of crates, odd slots a fallen
// tree lying across the lane.
func (w *outdoorWorld) obstaclesAhead(camZ float64, sc *scene) {
	crate := [3]float32{0.55, 0.40, 0.22}
	for m := int(math.Ceil((camZ + 2) / obstacleEvery)); float64(m)*obstacleEvery <= camZ+viewAhead; m++ {
		z := float64(m) * obstacleEvery
		x := w.laneW / 2
		g := newRNG(w.seed, uint64(int64(m)), 0x0B5)
		if m%2 == 0 {
			// Two crates side by side and one on top.
			a, b := g.rangeF(0.6, 0.9), g.rangeF(0.6, 0.9)
			sc.box(x-a-0.05, 0, z, x-0.05, a, z+a, matConcrete, ClassStatic, crate, 21, true)
			sc.box(x+0.05, 0, z, x+0.05+b, b, z+b, matConcrete, ClassStatic, scale3(crate, 0.85), 22, true)
			c := g.rangeF(0.5, 0.7)
			sc.box(x-c/2, math.Min(a, b), z+0.05, x+c/2, math.Min(a, b)+c, z+0.05+c, matConcrete, ClassStatic, scale3(crate, 1.1), 23, true)
			continue
		}
		// Trunk across the lane (a box: the scene has no horizontal
		// cylinders), broken branches, and the crown on the right side.
		r := g.rangeF(0.25, 0.4)
		half := w.laneW/2 + 0.8
		bark := [3]float32{0.30, 0.22, 0.15}
		sc.box(x-half, 0, z, x+half, 2*r, z+2*r, matBark, ClassVegetation, bark, 0, true)
		sc.box(x-0.4, 2*r, z+0.1, x-0.25, 2*r+0.6, z+0.25, matBark, ClassVegetation, bark, 0, true)
		for i := range 4 {
			sc.sphere(x+half-0.6+g.rangeF(-0.5, 0.5), 0.6+g.rangeF(0, 0.6), z+r+g.rangeF(-0.6, 0.6),
				g.rangeF(0.6, 1.0), matFoliage, ClassVegetation, [3]float32{0.18, 0.30, 0.10}, uint32(i), true)
		}
	}
}

var carColors = [...][3]float32{
	{0.80, 0.80, 0.78}, {0.55, 0.56, 0.58}, {0.05, 0.05, 0.06}, {0.55, 0.06, 0.05},
	{0.08, 0.16, 0.45}, {0.22, 0.23, 0.25}, {0.75, 0.72, 0.62}, {0.10, 0.30, 0.18},
}

var facadeColors = [...][3]float32{
	{0.72, 0.66, 0.55}, {0.62, 0.62, 0.60}, {0.80, 0.78, 0.72}, {0.62, 0.38, 0.28},
	{0.78, 0.70, 0.45}, {0.48, 0.52, 0.58}, {0.55, 0.30, 0.22}, {0.70, 0.58, 0.50},
}

var clothColors = [...][3]float32{
	{0.10, 0.12, 0.25}, {0.50, 0.05, 0.05}, {0.80, 0.80, 0.80}, {0.08, 0.08, 0.08},
	{0.20, 0.40, 0.20}, {0.60, 0.50, 0.30}, {0.30, 0.30, 0.35}, {0.70, 0.45, 0.10},
}

// segment emits the static content of road segment k (both sides).
func (w *outdoorWorld) segment(k int, sc *scene) {
	z0 := float64(k) * segLen
	z1 := z0 + segLen
	for side := -1; side <= 1; side += 2 {
		s := float64(side)
		g := newRNG(w.seed, uint64(int64(k)), uint64(side+2))
		// zone type is shared by a block of segments so streets look coherent
		block := int(math.Floor(float64(k) / 4))
		bg := newRNG(w.seed, uint64(int64(block)), uint64(side+2), 0xB10C)
		zone := bg.float()
		setback := bg.rangeF(0, 1.5)
		xb := w.roadHalf + w.sideW // outer sidewalk edge
		building := zone < w.buildingP
		walkOuter := xb
		if building {
			walkOuter = xb + setback
		}
		lo, hi := w.roadHalf, walkOuter
		sc.box(minS(s, lo, hi), 0, z0, maxS(s, lo, hi), sidewalkHeight, z1, matSidewalk, ClassSidewalk, [3]float32{0.52, 0.51, 0.49}, uint32(k), false)

		switch {
		case building:
			gap0, gap1 := 0.0, 0.0
			if g.chance(0.25) {
				gap1 = g.rangeF(2, 4.5)
			}
			depth := g.rangeF(8, 14)
			height := g.rangeF(7, 22)
			col := facadeColors[g.intn(len(facadeColors))]
			shade := float32(g.rangeF(0.9, 1.08))
			col = [3]float32{col[0] * shade, col[1] * shade, col[2] * shade}
			p := sc.box(minS(s, walkOuter, walkOuter+depth), 0, z0+gap0, maxS(s, walkOuter, walkOuter+depth), height, z1-gap1,
				matFacade, ClassBuilding, col, uint32(g.next()), true)
			p.a = g.rangeF(2.9, 3.4)  // floor height
			p.b = g.rangeF(1.8, 3.0)  // window spacing
			p.c = g.rangeF(0.45, 0.7) // window width fraction
			if gap1 > 0 {
				w.distantBuilding(&g, s, walkOuter+depth*0.6, z1-gap1, z1, sc)
			}
			if g.chance(0.3) {
				w.tree(&g, s*(w.roadHalf+0.9), z0+g.rangeF(1, 9), 0.8, sc)
			}
		case zone < w.buildingP+0.6*(1-w.buildingP):
			// green: fence or hedge, trees, maybe a building behind
			switch r := g.float(); {
			case r < 0.45:
				h := g.rangeF(1.0, 1.9)
				p := sc.box(minS(s, xb+0.05, xb+0.12), 0, z0, maxS(s, xb+0.05, xb+0.12), h, z1, matFence, ClassFence, [3]float32{0.42, 0.30, 0.19}, uint32(g.next()), true)
				p.a = h
			case r < 0.75:
				h := g.rangeF(0.9, 1.6)
				sc.box(minS(s, xb+0.1, xb+0.9), 0, z0, maxS(s, xb+0.1, xb+0.9), h, z1, matHedge, ClassVegetation, [3]float32{0.12, 0.24, 0.06}, uint32(g.next()), true)
			}
			n := 1 + g.intn(3)
			for i := 0; i < n; i++ {
				w.tree(&g, s*(xb+g.rangeF(1.8, 9)), z0+g.rangeF(0.5, 9.5), 1.0, sc)
			}
			if g.chance(0.5) {
				w.distantBuilding(&g, s, xb+g.rangeF(12, 25), z0, z1, sc)
			}
		default:
			// concrete wall with trees and a building behind it
			h := g.rangeF(1.4, 2.8)
			p := sc.box(minS(s, xb+0.05, xb+0.3), 0, z0, maxS(s, xb+0.05, xb+0.3), h, z1, matConcrete, ClassWall, [3]float32{0.58, 0.57, 0.54}, uint32(g.next()), true)
			p.a = h
			if g.chance(0.7) {
				w.tree(&g, s*(xb+g.rangeF(2, 6)), z0+g.rangeF(1, 9), 1.0, sc)
			}
			if g.chance(0.6) {
				w.distantBuilding(&g, s, xb+g.rangeF(8, 18), z0, z1, sc)
			}
		}

		// street furniture on the sidewalk
		if (k+(side+1)/2)%w.lightEvery == 0 {
			x := s * (w.roadHalf + 0.45)
			zp := z0 + 2
			sc.cylinder(x, zp, 0.09, 0, 7.2, matPole, ClassPole, [3]float32{0.42, 0.43, 0.45}, 0, true)
			xa := x - s*1.6
			sc.box(math.Min(x, xa), 7.0, zp-0.06, math.Max(x, xa), 7.12, zp+0.06, matPole, ClassPole, [3]float32{0.42, 0.43, 0.45}, 0, true)
			sc.box(math.Min(xa, xa+s*0.5), 6.9, zp-0.15, math.Max(xa, xa+s*0.5), 7.05, zp+0.15, matPole, ClassPole, [3]float32{0.6, 0.6, 0.58}, 1, false)
		}
		if g.chance(0.16) {
			x := s * (w.roadHalf + 0.35)
			zp := z0 + g.rangeF(3, 9)
			sc.cylinder(x, zp, 0.035, 0, 2.3, matPole, ClassPole, [3]float32{0.5, 0.5, 0.5}, 0, true)
			half := g.rangeF(0.28, 0.38)
			p := sc.box(x-half, 2.25, zp-0.05, x+half, 2.25+2*half, zp-0.02, matSign, ClassTrafficSign, [3]float32{0.6, 0.6, 0.6}, uint32(g.intn(3)), true)
			p.a, p.b, p.c = x, 2.25+half, half
		}
		if g.chance(0.2) {
			x := s * (w.roadHalf + g.rangeF(0.7, math.Max(0.8, w.sideW-0.4)))
			w.person(&g, x, z0+g.rangeF(0.5, 9.5), sc)
		}
		if g.chance(0.45) {
			l := g.rangeF(3.9, 4.7)
			zc := z0 + g.rangeF(l/2+0.3, segLen-l/2-0.3)
			w.car(&g, s*(w.laneW+w.parkW/2), zc, l, g.rangeF(1.7, 1.9), 1, sc)
		}
	}
}

func minS(s, a, b float64) float64 { return math.Min(s*a, s*b) }
func maxS(s, a, b float64) float64 { return math.Max(s*a, s*b) }

func (w *outdoorWorld) distantBuilding(g *rng, s, xIn, z0, z1 float64, sc *scene) {
	depth := g.rangeF(8, 14)
	col := facadeColors[g.intn(len(facadeColors))]
	p := sc.box(minS(s, xIn, xIn+depth), 0, z0, maxS(s, xIn, xIn+depth), g.rangeF(6, 16), z1, matFacade, ClassBuilding, col, uint32(g.next()), true)
	p.a = g.rangeF(2.9, 3.4)
	p.b = g.rangeF(1.8, 3.0)
	p.c = g.rangeF(0.45, 0.7)
}

func (w *outdoorWorld) tree(g *rng, x, z, scale float64, sc *scene) {
	trunkH := g.rangeF(1.8, 3.2) * scale
	r := g.rangeF(0.12, 0.25) * scale
	sc.cylinder(x, z, r, 0, trunkH+0.5, matBark, ClassVegetation, [3]float32{0.26, 0.19, 0.13}, 0, true)
	cr := g.rangeF(1.3, 2.6) * scale
	green := [3]float32{float32(g.rangeF(0.08, 0.16)), float32(g.rangeF(0.20, 0.32)), float32(g.rangeF(0.05, 0.10))}
	tex := uint32(g.next())
	sc.sphere(x, trunkH+cr*0.8, z, cr, matFoliage, ClassVegetation, green, tex, true)
	n := g.intn(3)
	for i := 0; i < n; i++ {
		r2 := cr * g.rangeF(0.55, 0.8)
		sc.sphere(x+g.rangeF(-cr, cr)*0.6, trunkH+cr*0.8+g.rangeF(-0.3, 0.8)*cr, z+g.rangeF(-cr, cr)*0.6, r2, matFoliage, ClassVegetation, green, tex+1, true)
	}
}

func (w *outdoorWorld) person(g *rng, x, z float64, sc *scene) {
	h := g.rangeF(1.35, 1.55)
	top := clothColors[g.intn(len(clothColors))]
	p := sc.cylinder(x, z, 0.2, 0, h, matPersonBody, ClassPerson, top, uint32(g.intn(len(clothColors))), true)
	p.a = h * 0.55 // waist height
	sc.sphere(x, h+0.12, z, 0.11, matPersonHead, ClassPerson, [3]float32{0.62, 0.46, 0.36}, uint32(g.intn(3)), true)
}

// car emits a car centred at (x, z) of length l and width wd; facing +1
// means its front points to +z.
func (w *outdoorWorld) car(g *rng, x, z, l, wd, facing float64, sc *scene) {
	col := carColors[g.intn(len(carColors))]
	x0, x1 := x-wd/2, x+wd/2
	zb0, zb1 := z-l/2, z+l/2
	p := sc.box(x0, 0.28, zb0, x1, 0.95, zb1, matCarBody, ClassCar, col, uint32(g.next()), true)
	p.a, p.b = facing, x
	// cabin sits toward the rear
	front, back := 0.22*l, 0.28*l
	if facing < 0 {
		front, back = back, front
	}
	p = sc.box(x0+0.1, 0.95, zb0+back, x1-0.1, g.rangeF(1.38, 1.5), zb1-front, matCarCabin, ClassCar, col, 0, true)
	p.a, p.b = facing, x
	wr := 0.32
	for _, wz := range [2]float64{zb0 + 0.2*l, zb1 - 0.2*l} {
		for _, side := range [2]float64{-1, 1} {
			xo := x + side*(wd/2+0.015)
			xi := x + side*(wd/2-0.25)
			p = sc.box(math.Min(xo, xi), 0, wz-wr, math.Max(xo, xi), 2*wr, wz+wr, matTyre, ClassCar, [3]float32{0.03, 0.03, 0.03}, 0, false)
			p.a, p.b = wz, wr
		}
	}
}

// traffic adds the moving cars of frame index: a lead car keeping its gap in
// the ego lane and oncoming cars in the other lane.
func (w *outdoorWorld) traffic(index int, camZ float64, sc *scene) {
	if w.lead {
		gap := 12 + 22*float64(valueNoise(float64(index)/120, 0.5, uint32(w.seed)))
		g := newRNG(w.seed, 0x1EAD)
		w.car(&g, w.laneW/2, camZ+gap, 4.3, 1.8, 1, sc)
	}
	const spacing = 22.0
	shift := w.onSpeed * float64(index)
	m0 := int(math.Floor((camZ - viewBehind + shift) / spacing))
	m1 := int(math.Floor((camZ + viewAhead + shift) / spacing))
	for m := m0; m <= m1; m++ {
		g := newRNG(w.seed, uint64(int64(m)), 0x0CC)
		if !g.chance(w.oncoming) {
			continue
		}
		z := float64(m)*spacing + g.rangeF(0, spacing-5) - shift
		if z < camZ-viewBehind || z > camZ+viewAhead {
			continue
		}
		w.car(&g, -w.laneW/2+g.rangeF(-0.2, 0.2), z, g.rangeF(3.9, 4.7), g.rangeF(1.7, 1.9), -1, sc)
	}
}
