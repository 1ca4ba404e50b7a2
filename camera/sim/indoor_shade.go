package sim

import "math"

var bookColors = [...][3]float32{
	{0.55, 0.1, 0.08}, {0.1, 0.2, 0.45}, {0.12, 0.35, 0.15}, {0.75, 0.7, 0.55}, {0.1, 0.1, 0.1},
	{0.6, 0.45, 0.1}, {0.4, 0.15, 0.35}, {0.8, 0.8, 0.78},
}

// shade returns the material response of the indoor surface at (px, py, pz).
func (w *indoorWorld) shade(sc *scene, h *hit, px, py, pz, fp float64) surface {
	var s surface
	switch h.idx {
	case hitGround:
		return w.shadeFloor(sc, px, pz, fp, h.t)
	case hitCeiling:
		s.class = ClassNYUCeiling
		s.albedo = [3]float32{0.86, 0.86, 0.85}
		lightPanel := pulse(px, 2.4, 1.0, 0.6, fp) * pulse(pz, 2.4, 1.0, 0.6, fp)
		s.emit = 1.2 * lightPanel
		s.ao = w.cornerAO(sc, px, pz, 0.6)
		return s
	}
	p := &sc.prims[h.idx]
	s.albedo, s.class = p.col, p.class
	hc := pz
	if h.nz != 0 {
		hc = px
	}
	switch p.mat {
	case matWall:
		n := 0.94 + 0.08*valueNoise(hc/0.9, py/0.9, p.tex)
		s.albedo = scale3(p.col, n)
		skirt := band(py, 0, 0.1, fp)
		s.albedo = mix3(s.albedo, [3]float32{0.9, 0.9, 0.88}, skirt)
		ao := 0.45 * float32(math.Max(0, 1-(sc.ceiling-py)/0.5))
		ao = max32(ao, 0.35*float32(math.Max(0, 1-py/0.4)))
		if h.nz != 0 {
			ao = max32(ao, 0.4*float32(math.Max(0, 1-math.Min(px-p.x0+0.2, p.x1-0.2-px)/0.6)))
		}
		s.ao = ao
	case matWood:
		grain := 0.85 + 0.25*valueNoise(hc*6, py*0.6, p.tex)
		s.albedo = scale3(p.col, grain)
		if p.a > 0 && h.ny == 0 {
			// drawer or door seams with handles
			n := 2.0 * p.a
			var span, lo float64
			if h.nz != 0 {
				span, lo = p.x1-p.x0, p.x0
			} else {
				span, lo = p.z1-p.z0, p.z0
			}
			seam := pulse(hc-lo, span/n, span/n-0.01, 0.01, fp)
			if p.a == 1 {
				seam = max32(seam, pulse(py, (p.y1-p.y0)/3, 0, 0.01, fp))
			}
			handle := pulse(hc-lo, span/n, span/n*0.45, span/n*0.1, fp) * band(py, p.y1*0.55, p.y1*0.58, fp)
			s.albedo = scale3(s.albedo, (1-0.5*seam)*(1-0.6*handle))
		}
		s.spec = 0.05
	case matFabric, matPillow:
		weave := 0.9 + 0.15*valueNoise(hc/0.05, py/0.05, p.tex)*lod(0.05, fp)
		folds := 0.9 + 0.15*valueNoise(hc/0.4, py/0.4+pz, p.tex+1)
		s.albedo = scale3(p.col, weave*folds)
	case matMetal:
		s.spec = 0.2
	case matScreen:
		s.spec = 0.12
		lo, hi := p.x0, p.x1
		if h.nz == 0 {
			lo, hi = p.z0, p.z1
		}
		frame := 1 - band(hc, lo+0.03, hi-0.03, fp)*band(py, p.y0+0.03, p.y1-0.03, fp)
		s.albedo = mix3([3]float32{0.02, 0.02, 0.03}, [3]float32{0.12, 0.12, 0.12}, frame)
	case matShelf:
		w.shadeShelf(&s, p, h, hc, py, fp)
	case matPicture:
		if (h.nx != 0 && math.Abs(px-p.x0) > 0.02 && math.Abs(px-p.x1) > 0.02) || h.ny != 0 {
			break
		}
		var lo, hi float64
		if h.nz != 0 {
			lo, hi = p.x0, p.x1
		} else {
			lo, hi = p.z0, p.z1
		}
		in := band(hc, lo+0.05, hi-0.05, fp) * band(py, p.y0+0.05, p.y1-0.05, fp)
		a := valueNoise(hc/0.25, py/0.25, p.tex)
		b := valueNoise(hc/0.15, py/0.15, p.tex+1)
		art := [3]float32{0.2 + 0.7*a, 0.25 + 0.5*b, 0.3 + 0.5*(1-a)}
		s.albedo = mix3(p.col, art, in)
	case matRug:
		border := 1 - band(px, p.x0+0.12, p.x1-0.12, fp)*band(pz, p.z0+0.12, p.z1-0.12, fp)
		pat := valueNoise(px/0.3, pz/0.3, p.tex)
		s.albedo = mix3(scale3(p.col, 0.8+0.4*pat), scale3(p.col, 0.5), border)
	case matDoor:
		panel := pulse(hc, 0.45, 0.42, 0.03, fp) + pulse(py, 0.9, 0.87, 0.03, fp)
		s.albedo = scale3(p.col, 1-0.3*min32(1, panel))
	case matWindow:
		var lo, hi float64
		if h.nz != 0 {
			lo, hi = p.x0, p.x1
		} else {
			lo, hi = p.z0, p.z1
		}
		pane := band(hc, lo+0.07, hi-0.07, fp) * band(py, p.y0+0.07, p.y1-0.07, fp)
		mid := (lo + hi) / 2
		pane *= 1 - band(hc, mid-0.03, mid+0.03, fp)
		out := [3]float32{0.75, 0.85, 0.95}
		if py < (p.y0+p.y1)/2 {
			out = [3]float32{0.45, 0.55, 0.4} // trees / lawn outside
		}
		out = scale3(out, 0.9+0.2*valueNoise(hc/0.4, py/0.4, p.tex))
		s.albedo = mix3([3]float32{0.9, 0.9, 0.88}, out, pane)
		s.emit = 1.4 * pane
	case matLampShade:
		s.emit = 1.0
	case matPot:
		s.albedo = scale3(p.col, 0.9+0.2*valueNoise(py*10, pz, 3))
	case matPlant:
		n1 := valueNoise(px*6+pz*3, py*6, p.tex)
		s.albedo = scale3(p.col, 0.6+0.8*n1)
		s.bx = 0.8 * (valueNoise(px*9, py*9+pz, p.tex+2) - 0.5)
		s.by = 0.8 * (n1 - 0.5)
	}
	return s
}

func min32(a, b float32) float32 {
	if a < b {
		return a
	}
	return b
}

// cornerAO darkens floor and ceiling near the walls.
func (w *indoorWorld) cornerAO(sc *scene, px, pz, reach float64) float32 {
	// the walls are the first three primitives of every room
	lw, rw, fw := &sc.prims[0], &sc.prims[1], &sc.prims[2]
	d := math.Min(math.Min(px-lw.x1, rw.x0-px), fw.z0-pz)
	if d >= reach {
		return 0
	}
	if d < 0 {
		d = 0
	}
	return 0.4 * float32(1-d/reach)
}

func (w *indoorWorld) shadeFloor(sc *scene, x, z, fp, t float64) surface {
	rm := &w.cur
	s := surface{class: ClassNYUFloor}
	fpz := fp * t / math.Max(0.3, sc.oy)
	switch rm.floorKind {
	case 0: // wooden planks
		pw := rm.plank
		row := math.Floor(x / pw)
		off := float64(unit(hash3(uint32(int32(row)), rm.tex, 1))) * 1.5
		seamX := pulse(x, pw, pw-0.004, 0.004, fp)
		seamZ := pulse(z+off, 1.5, 1.5-0.004, 0.004, fpz)
		tint := 0.85 + 0.3*unit(hash3(uint32(int32(row)), uint32(int32(math.Floor((z+off)/1.5))), rm.tex))
		grain := 0.9 + 0.2*valueNoise(x/0.01*lodF(0.01, fp), z/0.3, rm.tex+5)
		s.albedo = scale3(rm.floorCol, tint*grain*(1-0.5*max32(seamX, seamZ)))
		s.spec = 0.08
	case 1: // tiles
		j := max32(pulse(x, 0.6, 0, 0.006, fp), pulse(z, 0.6, 0, 0.006, fpz))
		tint := 0.92 + 0.1*cellNoise(x/0.6, z/0.6, rm.tex)
		s.albedo = scale3(rm.floorCol, tint*(1-0.4*j))
		s.spec = 0.12
	default: // carpet
		n := 0.9 + 0.2*valueNoise(x/0.5, z/0.5, rm.tex) + 0.1*(cellNoise(x/0.01, z/0.01, 2)-0.5)*lod(0.01, fp)
		s.albedo = scale3(rm.floorCol, n)
	}
	s.ao = w.cornerAO(sc, x, z, 0.5)
	return s
}

// lodF is 1 when a feature of size s is resolved and scales coordinates
// down (blurring the feature) otherwise.
func lodF(s, fp float64) float64 {
	if fp <= s {
		return 1
	}
	return s / fp
}

func (w *indoorWorld) shadeShelf(s *surface, p *prim, h *hit, hc, py, fp float64) {
	front := (h.nz < 0 && p.z0 > 0) || (h.nx != 0 && ((h.nx > 0 && p.x0 < 0) || (h.nx < 0 && p.x0 > 0)))
	if !front || h.ny != 0 {
		return
	}
	shelfH := p.a
	level := math.Floor(py / shelfH)
	ly := py - level*shelfH
	board := band(ly, 0, 0.03, fp) + band(py, p.y1-0.03, p.y1, fp)
	var lo, hi float64
	if h.nz != 0 {
		lo, hi = p.x0, p.x1
	} else {
		lo, hi = p.z0, p.z1
	}
	side := 1 - band(hc, lo+0.03, hi-0.03, fp)
	bookW := 0.035
	bi := uint32(int32(math.Floor((hc - lo) / bookW)))
	hb := unit(hash3(bi, uint32(int32(level)), p.tex))
	bookTop := 0.03 + shelfH*(0.5+0.35*float64(hb))
	var col [3]float32
	if ly < bookTop && hb > 0.08 {
		col = bookColors[hash3(bi, uint32(int32(level))+7, p.tex)%uint32(len(bookColors))]
		col = scale3(col, 0.8+0.3*lod(bookW, fp)*(unit(hash3(bi, 3, p.tex))-0.5))
	} else {
		col = [3]float32{0.06, 0.05, 0.04} // the dark back of the shelf
	}
	s.albedo = mix3(col, p.col, min32(1, board+side))
}
