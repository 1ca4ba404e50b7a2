package sim

import "math"

// hash3 is a 32-bit integer hash (xorshift-multiply finaliser) used for
// procedural textures and layout decisions.
func hash3(a, b, c uint32) uint32 {
	h := a*0x9E3779B1 ^ (b+0x7F4A7C15)*0x85EBCA77 ^ (c+0x165667B1)*0xC2B2AE3D
	h ^= h >> 15
	h *= 0x2C1B3C6D
	h ^= h >> 12
	h *= 0x297A2D39
	h ^= h >> 15
	return h
}

func unit(h uint32) float32 { return float32(h>>8) * (1.0 / 16777216.0) }

// cell returns the integer cell of x for a lattice of the given spacing.
func cell(x float64) (int32, float32) {
	f := math.Floor(x)
	return int32(f), float32(x - f)
}

// valueNoise is smooth 2D value noise in [0,1) on a unit lattice.
func valueNoise(x, y float64, seed uint32) float32 {
	ix, fx := cell(x)
	iy, fy := cell(y)
	a := unit(hash3(uint32(ix), uint32(iy), seed))
	b := unit(hash3(uint32(ix+1), uint32(iy), seed))
	c := unit(hash3(uint32(ix), uint32(iy+1), seed))
	d := unit(hash3(uint32(ix+1), uint32(iy+1), seed))
	sx := fx * fx * (3 - 2*fx)
	sy := fy * fy * (3 - 2*fy)
	return (a+(b-a)*sx)*(1-sy) + (c+(d-c)*sx)*sy
}

// cellNoise is per-cell white noise in [0,1).
func cellNoise(x, y float64, seed uint32) float32 {
	ix, _ := cell(x)
	iy, _ := cell(y)
	return unit(hash3(uint32(ix), uint32(iy), seed))
}

// lod fades a texture feature of size s (metres) out once the pixel
// footprint fp (metres) exceeds it, so distant textures average out instead
// of aliasing into noise.
func lod(s, fp float64) float32 {
	r := s / fp
	switch {
	case r >= 2:
		return 1
	case r <= 0.5:
		return 0
	}
	return float32((r - 0.5) / 1.5)
}

// pulse is the box-filtered coverage of a periodic pulse train: the fraction
// of [x-w/2, x+w/2] that lies in intervals [k*period+start, k*period+start+width).
func pulse(x, period, start, width, w float64) float32 {
	if w < 1e-6 {
		w = 1e-6
	}
	a := pulseIntegral(x-w/2, period, start, width)
	b := pulseIntegral(x+w/2, period, start, width)
	c := (b - a) / w
	if c < 0 {
		return 0
	}
	if c > 1 {
		return 1
	}
	return float32(c)
}

func pulseIntegral(x, period, start, width float64) float64 {
	x -= start
	k := math.Floor(x / period)
	r := x - k*period
	if r > width {
		r = width
	}
	return k*width + r
}

// band is the box-filtered coverage of the single interval [lo, hi].
func band(x, lo, hi, w float64) float32 {
	if w < 1e-6 {
		w = 1e-6
	}
	a := math.Max(x-w/2, lo)
	b := math.Min(x+w/2, hi)
	if b <= a {
		return 0
	}
	return float32((b - a) / w)
}

// rng is a splitmix64 generator for layout decisions.
type rng struct{ s uint64 }

func newRNG(parts ...uint64) rng {
	r := rng{s: 0x9E3779B97F4A7C15}
	for _, p := range parts {
		r.s ^= p
		r.next()
	}
	return r
}

func (r *rng) next() uint64 {
	r.s += 0x9E3779B97F4A7C15
	z := r.s
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func (r *rng) float() float64              { return float64(r.next()>>11) / (1 << 53) }
func (r *rng) rangeF(a, b float64) float64 { return a + (b-a)*r.float() }
func (r *rng) chance(p float64) bool       { return r.float() < p }
func (r *rng) intn(n int) int              { return int(r.next() % uint64(n)) }
