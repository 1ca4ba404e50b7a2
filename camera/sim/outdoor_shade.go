package sim

import "math"

// shade returns the material response of the outdoor surface hit at
// (px, py, pz); fp is the pixel footprint in metres at that depth.
func (w *outdoorWorld) shade(sc *scene, h *hit, px, py, pz, fp float64) surface {
	if h.idx == hitGround {
		return w.shadeGround(px, pz, fp, h.t)
	}
	p := &sc.prims[h.idx]
	s := surface{albedo: p.col, class: p.class}
	// horizontal texture coordinate along the face
	hc := pz
	if h.nz != 0 {
		hc = px
	}
	switch p.mat {
	case matSidewalk:
		s.receives = true
		if h.ny > 0.5 {
			fpz := fp * math.Max(1, h.t/math.Max(0.3, sc.oy-py))
			j := max32(pulse(px, 0.5, 0, 0.03, fp), pulse(pz, 0.5, 0, 0.03, fpz))
			tint := 0.92 + 0.16*cellNoise(px/0.5, pz/0.5, p.tex+7)*lod(0.5, fpz)
			grain := 1 + 0.12*(valueNoise(px/0.06, pz/0.06, 3)-0.5)*lod(0.06, fpz)
			f := tint * grain * (1 - 0.35*j)
			s.albedo = scale3(p.col, f)
		} else {
			s.albedo = [3]float32{0.62, 0.61, 0.58}
		}
	case matFacade:
		w.shadeFacade(&s, p, h, px, py, pz, hc, fp)
	case matFence:
		gap := pulse(hc, 0.12, 0.10, 0.02, fp)
		grain := 0.85 + 0.3*valueNoise(hc/0.12, py/1.5, p.tex)
		rail := band(py, p.a-0.25, p.a-0.15, fp) + band(py, 0.25, 0.35, fp)
		f := grain * (1 - 0.6*gap) * (1 - 0.25*rail)
		s.albedo = scale3(p.col, f)
	case matHedge:
		n := valueNoise(hc/0.25, py/0.25, p.tex)
		s.albedo = scale3(p.col, 0.7+0.6*n)
		s.bx, s.by = 0.6*(n-0.5), 0.6*(valueNoise(hc/0.2+7, py/0.2, p.tex)-0.5)
		s.ao = 0.3 * float32(math.Max(0, 1-py/0.5))
	case matConcrete:
		stain := 0.85 + 0.25*valueNoise(hc/1.5, py/0.8, p.tex)
		joint := pulse(hc, 2.5, 0, 0.04, fp)
		s.albedo = scale3(p.col, stain*(1-0.4*joint))
	case matPole:
		s.spec = 0.08
		s.albedo = scale3(p.col, 0.9+0.1*float32(math.Min(1, py/7)))
		if p.tex == 1 && h.ny < 0 {
			s.albedo, s.emit = [3]float32{0.9, 0.88, 0.75}, 0.6
		}
	case matSign:
		w.shadeSign(&s, p, h, px, py)
	case matFoliage:
		n1 := valueNoise(px*1.7+pz*0.9, py*1.7, p.tex)
		n2 := lod(0.12, fp) * (cellNoise(px/0.09+pz/0.13, py/0.09, p.tex+1) - 0.5)
		f := 0.55 + 0.7*n1 + 0.35*n2
		s.albedo = scale3(p.col, f)
		s.bx = 0.9 * (valueNoise(px*3.1, py*3.1+pz, p.tex+2) - 0.5)
		s.by = 0.9 * (valueNoise(pz*3.1, py*3.1+px, p.tex+3) - 0.5)
		s.bz = 0.9 * (n1 - 0.5)
	case matBark:
		streak := 0.8 + 0.4*valueNoise(math.Atan2(pz-p.pz, px-p.px)*6, py/0.4, 11)
		s.albedo = scale3(p.col, streak)
	case matCarBody:
		w.shadeCarBody(&s, p, h, px, py, pz, fp)
	case matCarCabin:
		s.spec = 0.15
		if h.ny > 0.5 {
			break // roof
		}
		pillar := float32(0.09)
		var c float32
		if h.nz != 0 {
			c = band(px, p.x0+float64(pillar), p.x1-float64(pillar), fp)
		} else {
			c = band(pz, p.z0+float64(pillar)+0.05, p.z1-float64(pillar)-0.05, fp)
		}
		c *= band(py, p.y0+0.04, p.y1-0.06, fp)
		glass := [3]float32{0.03, 0.035, 0.04}
		s.albedo = mix3(p.col, glass, c)
		s.spec = 0.15 + 0.2*c
	case matTyre:
		s.albedo = [3]float32{0.035, 0.035, 0.035}
		if h.nx != 0 {
			d := math.Hypot(pz-p.a, py-p.b)
			rim := band(d, 0, 0.19, fp)
			s.albedo = mix3(s.albedo, [3]float32{0.38, 0.38, 0.4}, rim)
		}
	case matPersonBody:
		if py < p.a {
			s.albedo = clothColors[(int(p.tex)+3)%len(clothColors)]
			s.albedo = scale3(s.albedo, 0.7)
		}
	case matPersonHead:
		if h.ny > 0.2 || (p.tex == 0 && h.nz > 0) {
			s.albedo = [3]float32{0.08, 0.06, 0.05}
		}
	}
	return s
}

func scale3(c [3]float32, f float32) [3]float32 { return [3]float32{c[0] * f, c[1] * f, c[2] * f} }

func max32(a, b float32) float32 {
	if a > b {
		return a
	}
	return b
}

// shadeGround textures the road (asphalt, lane markings, tyre tracks) and
// the terrain beyond the sidewalks.
func (w *outdoorWorld) shadeGround(x, z, fp, t float64) surface {
	s := surface{receives: true}
	// along z a ground pixel spans ~ t/height times more than across
	fpz := fp * t / outdoorCameraHeight
	ax := math.Abs(x)
	if ax < w.roadHalf {
		s.class = ClassRoad
		base := w.asphalt * (0.85 + 0.3*valueNoise(x/2.5, z/2.5, uint32(w.seed)))
		grain := 1 + 0.35*(cellNoise(x/0.05, z/0.05, 5)-0.5)*lod(0.05, math.Max(fp, fpz*0.5))
		track := float32(1)
		for _, c := range [2]float64{w.laneW/2 - 0.8, w.laneW/2 + 0.8} {
			track -= 0.12 * band(math.Abs(x), c-0.3, c+0.3, fp)
		}
		a := base * grain * track
		s.albedo = [3]float32{a, a, a * 1.04}
		// centre dashes (3 m paint, 6 m gap) and solid lines at the lane edges
		paint := band(x, -0.06, 0.06, fp) * pulse(z, 9, 0, 3, fpz)
		paint = max32(paint, band(ax, w.laneW-0.06, w.laneW+0.06, fp))
		if paint > 0 {
			wear := 0.75 + 0.25*valueNoise(x/0.3, z/0.3, 9)
			s.albedo = mix3(s.albedo, [3]float32{0.78 * wear, 0.78 * wear, 0.76 * wear}, paint)
		}
		// darker band along the curb
		s.ao = 0.35 * float32(math.Max(0, 1-(w.roadHalf-ax)/0.25))
		return s
	}
	s.class = ClassTerrain
	n := valueNoise(x/3, z/3, uint32(w.seed)+1)
	grass := [3]float32{0.13, 0.22, 0.06}
	dry := [3]float32{0.33, 0.29, 0.16}
	s.albedo = mix3(grass, dry, n*n)
	g := 0.8 + 0.4*valueNoise(x/0.15, z/0.15, 4)*lod(0.15, math.Max(fp, fpz*0.5)) + 0.2*(1-lod(0.15, math.Max(fp, fpz*0.5)))
	s.albedo = scale3(s.albedo, g)
	return s
}

func (w *outdoorWorld) shadeFacade(s *surface, p *prim, h *hit, px, py, pz, hc, fp float64) {
	if h.ny != 0 {
		s.albedo = [3]float32{0.22, 0.21, 0.2}
		return
	}
	col := p.col
	brick := p.tex%3 == 0
	if brick {
		row := pulse(py, 0.075, 0.065, 0.01, fp)
		off := 0.0
		if int(math.Floor(py/0.075))%2 == 1 {
			off = 0.125
		}
		head := pulse(hc+off, 0.25, 0.24, 0.01, fp)
		m := max32(row, head) * lod(0.075, fp)
		tint := 0.9 + 0.2*cellNoise((hc+off)/0.25, py/0.075, p.tex)*lod(0.1, fp)
		col = mix3(scale3(col, tint), [3]float32{0.55, 0.53, 0.5}, m)
	} else {
		col = scale3(col, 0.9+0.18*valueNoise(hc/0.8, py/0.8, p.tex))
	}
	floorH := p.a
	// ledge at every floor
	ledge := pulse(py, floorH, floorH-0.18, 0.18, fp)
	col = scale3(col, 1-0.22*ledge)
	// windows: ground floor gets shop windows
	var wc float32
	if py < floorH {
		wc = pulse(hc, p.b*2, p.b*0.3, p.b*1.4, fp) * band(py, 0.5, floorH-0.5, fp)
	} else if py < p.y1-0.8 {
		ww := p.b * p.c
		wc = pulse(hc, p.b, (p.b-ww)/2, ww, fp) * pulse(py, floorH, 0.95, 1.45, fp)
	}
	if wc > 0 {
		v := float32(0.6 + 0.8*cellNoise(hc/p.b, py/floorH, p.tex+3))
		glass := [3]float32{0.06 * v, 0.08 * v, 0.10 * v}
		// window frame darkening at the border is implicit in the box filter
		col = mix3(col, glass, wc)
		s.spec = 0.55 * wc
	}
	// cornice at the top
	col = scale3(col, 1-0.3*band(py, p.y1-0.45, p.y1, fp))
	s.albedo = col
	s.ao = 0.35 * float32(math.Max(0, 1-py/0.6))
}

func (w *outdoorWorld) shadeSign(s *surface, p *prim, h *hit, px, py float64) {
	if h.nz >= 0 || h.ny != 0 {
		s.albedo = [3]float32{0.45, 0.45, 0.46}
		return
	}
	lx, ly := (px-p.a)/p.c, (py-p.b)/p.c
	r := math.Hypot(lx, ly)
	white := [3]float32{0.85, 0.85, 0.85}
	switch p.tex {
	case 0: // prohibitory: red ring on white
		switch {
		case r > 0.98:
			s.albedo = [3]float32{0.5, 0.5, 0.5}
		case r > 0.72:
			s.albedo = [3]float32{0.7, 0.05, 0.04}
		default:
			s.albedo = white
		}
	case 1: // mandatory: blue disc with a white arrow bar
		switch {
		case r > 0.98:
			s.albedo = [3]float32{0.5, 0.5, 0.5}
		case math.Abs(lx) < 0.15 && ly > -0.6 && ly < 0.5:
			s.albedo = white
		default:
			s.albedo = [3]float32{0.04, 0.18, 0.6}
		}
	default: // priority road: yellow diamond on white
		if math.Abs(lx)+math.Abs(ly) < 0.6 {
			s.albedo = [3]float32{0.85, 0.65, 0.03}
		} else {
			s.albedo = white
		}
	}
}

func (w *outdoorWorld) shadeCarBody(s *surface, p *prim, h *hit, px, py, pz, fp float64) {
	s.spec = 0.18
	if h.ny < 0 {
		s.albedo, s.spec = [3]float32{0.02, 0.02, 0.02}, 0
		return
	}
	if h.ny > 0 {
		return
	}
	// dark sill and bumpers
	sill := band(py, p.y0, p.y0+0.14, fp)
	s.albedo = mix3(s.albedo, [3]float32{0.04, 0.04, 0.045}, sill)
	if h.nz == 0 {
		// door seam
		mid := (p.z0 + p.z1) / 2
		seam := band(pz, mid-0.01, mid+0.01, fp) * band(py, p.y0+0.15, p.y1-0.05, fp)
		s.albedo = scale3(s.albedo, 1-0.5*seam)
		return
	}
	// front or back face: lights and plate
	rear := (h.nz < 0) == (p.a > 0)
	hw := (p.x1 - p.x0) / 2
	dx := math.Abs(px - p.b)
	lamp := band(dx, hw-0.42, hw-0.08, fp) * band(py, 0.68, 0.84, fp)
	if rear {
		s.albedo = mix3(s.albedo, [3]float32{0.6, 0.04, 0.03}, lamp)
		s.emit = 0.3 * lamp
	} else {
		s.albedo = mix3(s.albedo, [3]float32{0.85, 0.85, 0.8}, lamp)
		grille := band(dx, 0, hw-0.5, fp) * band(py, 0.5, 0.7, fp)
		s.albedo = mix3(s.albedo, [3]float32{0.05, 0.05, 0.05}, grille)
	}
	plate := band(dx, 0, 0.26, fp) * band(py, 0.42, 0.54, fp)
	s.albedo = mix3(s.albedo, [3]float32{0.8, 0.8, 0.78}, plate)
}
