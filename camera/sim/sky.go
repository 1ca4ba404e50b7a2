package sim

import "math"

// skyModel holds the light of one seed: sun direction and colour, ambient,
// sky gradient, clouds and haze.
type skyModel struct {
	lx, ly, lz      float64
	sun, ambient    [3]float32
	zenith, horizon [3]float32
	haze            float64 // extinction 1/m of the default aerial perspective
	hazeCol         [3]float32
	cloudCover      float32
	cloudSeed       uint32
}

func newSkyModel(seed int64, outdoor bool) skyModel {
	g := newRNG(uint64(seed), 0x5C1)
	var s skyModel
	if outdoor {
		elev := g.rangeF(28, 65) * math.Pi / 180
		az := g.rangeF(-150, 150) * math.Pi / 180
		s.lx, s.ly, s.lz = math.Cos(elev)*math.Sin(az), math.Sin(elev), math.Cos(elev)*math.Cos(az)
		warm := float32(g.rangeF(0, 1)) // 0 = neutral noon, 1 = warm afternoon
		overcast := float32(g.rangeF(0, 0.7))
		sunI := 1.05 * (1 - 0.6*overcast)
		s.sun = [3]float32{sunI * (1 + 0.10*warm), sunI * (1 + 0.02*warm), sunI * (1 - 0.15*warm)}
		ambI := 0.32 + 0.25*overcast
		s.ambient = [3]float32{ambI * 0.92, ambI * 0.97, ambI * 1.08}
		s.zenith = mix3([3]float32{0.18, 0.36, 0.78}, [3]float32{0.55, 0.58, 0.62}, overcast)
		s.horizon = mix3([3]float32{0.70, 0.80, 0.92}, [3]float32{0.78, 0.79, 0.80}, overcast)
		s.cloudCover = 0.25 + 0.5*float32(g.float()) + 0.3*overcast
		s.haze = g.rangeF(0.0015, 0.005)
		s.hazeCol = s.horizon
	} else {
		// key light through a window, slightly from above
		az := g.rangeF(-120, 120) * math.Pi / 180
		elev := g.rangeF(20, 55) * math.Pi / 180
		s.lx, s.ly, s.lz = math.Cos(elev)*math.Sin(az), math.Sin(elev), math.Cos(elev)*math.Cos(az)
		warm := float32(g.rangeF(0.2, 1))
		s.sun = [3]float32{0.55 * (1 + 0.1*warm), 0.55, 0.55 * (1 - 0.15*warm)}
		ambI := float32(g.rangeF(0.45, 0.65))
		s.ambient = [3]float32{ambI * (1 + 0.08*warm), ambI, ambI * (1 - 0.1*warm)}
		s.zenith = [3]float32{0.9, 0.9, 0.88}
		s.horizon = s.zenith
		s.hazeCol = [3]float32{0.6, 0.6, 0.6}
	}
	s.cloudSeed = uint32(g.next())
	return s
}

func mix3(a, b [3]float32, t float32) [3]float32 {
	return [3]float32{a[0] + (b[0]-a[0])*t, a[1] + (b[1]-a[1])*t, a[2] + (b[2]-a[2])*t}
}

// gradient is the sky colour for a view direction with vertical component
// dy (unit vector).
func (s *skyModel) gradient(dy float32) [3]float32 {
	if dy < 0 {
		dy = 0
	}
	t := float32(math.Sqrt(float64(dy)))
	return mix3(s.horizon, s.zenith, t)
}

// color shades a sky pixel looking along (du, sy, 1).
func (s *skyModel) color(du, sy float64, sc *scene) [3]float32 {
	inv := 1 / math.Sqrt(du*du+sy*sy+1)
	dy := sy * inv
	c := s.gradient(float32(dy))
	// sun glow
	cosSun := (du*s.lx + sy*s.ly + s.lz) * inv
	if cosSun > 0.9 {
		g := float32((cosSun - 0.9) / 0.1)
		g = g * g * g * 0.6
		c[0] += g
		c[1] += g * 0.95
		c[2] += g * 0.8
	}
	if sy > 0 {
		// clouds on a plane 1.2 km up: perspective squeezes them to the horizon
		t := 1200 / sy
		x, z := (sc.ox+t*du)/900, (sc.oz+t)/900
		n := 0.65*valueNoise(x, z, s.cloudSeed) + 0.35*valueNoise(x*2.7, z*2.7, s.cloudSeed+1)
		cov := n - (1 - s.cloudCover)
		if cov > 0 {
			a := cov * 3
			if a > 1 {
				a = 1
			}
			// fade near the horizon where the projection degenerates
			fade := float32(math.Min(1, dy*12))
			a *= fade * 0.85
			shade := 0.82 + 0.25*float32(valueNoise(x*6, z*6, s.cloudSeed+2))
			cl := [3]float32{shade, shade, shade * 1.02}
			c = mix3(c, cl, a)
		}
	}
	return c
}
