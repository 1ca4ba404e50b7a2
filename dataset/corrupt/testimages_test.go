package corrupt

import (
	"math"
	"math/rand/v2"
)

// roadScene synthesizes a road-like RGB frame: a sky gradient, a horizon of
// textured buildings and trees, a gray road with lane markings converging
// to a vanishing point, and grass verges.
func roadScene(w, h int) []uint8 {
	img := make([]uint8, w*h*3)
	rng := rand.New(rand.NewPCG(7, 7))
	horizon := h * 45 / 100
	vx := float64(w) / 2
	// Buildings: random boxes along the horizon.
	type box struct {
		x0, x1, top int
		col         [3]float64
	}
	var boxes []box
	for x := 0; x < w; {
		bw := 10 + rng.IntN(max(1, w/8))
		boxes = append(boxes, box{x, x + bw, horizon - 5 - rng.IntN(max(1, h/4)),
			[3]float64{90 + rng.Float64()*100, 80 + rng.Float64()*90, 70 + rng.Float64()*80}})
		x += bw
	}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			var r, g, b float64
			fy := float64(y) / float64(h)
			switch {
			case y < horizon:
				r, g, b = 120+100*fy, 160+80*fy, 235
				for _, bx := range boxes {
					if x >= bx.x0 && x < bx.x1 && y >= bx.top {
						r, g, b = bx.col[0], bx.col[1], bx.col[2]
						if (x/4+y/6)%3 == 0 { // windows
							r, g, b = r*0.5, g*0.5, b*0.6
						}
					}
				}
			default:
				t := float64(y-horizon) / float64(h-horizon) // 0 at horizon
				half := 0.05*float64(w) + t*0.45*float64(w)
				dx := float64(x) - vx
				if math.Abs(dx) < half {
					n := 10 * math.Sin(float64(x)*0.9+float64(y)*1.3) * math.Sin(float64(x)*0.37)
					r, g, b = 95+n, 95+n, 100+n
					// lane markings: centre dashes and edge lines
					lw := 0.5 + 3*t
					if math.Abs(dx) < lw && int(t*20)%2 == 0 {
						r, g, b = 240, 240, 230
					}
					if math.Abs(math.Abs(dx)-half*0.92) < lw {
						r, g, b = 235, 235, 225
					}
				} else {
					n := 25 * math.Sin(float64(x)*0.5) * math.Cos(float64(y)*0.7)
					r, g, b = 60+n, 130+n+20*t, 50+n
				}
			}
			i := (y*w + x) * 3
			img[i], img[i+1], img[i+2] = byteOf(r), byteOf(g), byteOf(b)
		}
	}
	return img
}

// gradientEdges: smooth colour ramps with sharp discs and bars.
func gradientEdges(w, h int) []uint8 {
	img := make([]uint8, w*h*3)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			fx, fy := float64(x)/float64(w), float64(y)/float64(h)
			r, g, b := 30+200*fx, 40+180*fy, 200-150*fx*fy
			cx, cy := float64(x)-0.3*float64(w), float64(y)-0.5*float64(h)
			if cx*cx+cy*cy < math.Pow(0.25*float64(h), 2) {
				r, g, b = 230, 60, 50
			}
			if (x/max(1, w/12))%2 == 0 && y > h*3/4 {
				r, g, b = 20, 20, 25
			}
			i := (y*w + x) * 3
			img[i], img[i+1], img[i+2] = byteOf(r), byteOf(g), byteOf(b)
		}
	}
	return img
}

// texture: band-limited noise (value noise octaves) around mid gray, like
// foliage or gravel.
func texture(w, h int) []uint8 {
	img := make([]uint8, w*h*3)
	rng := rand.New(rand.NewPCG(3, 9))
	const cell = 6
	gw, gh := w/cell+2, h/cell+2
	grid := make([][3]float64, gw*gh)
	for i := range grid {
		grid[i] = [3]float64{rng.Float64(), rng.Float64(), rng.Float64()}
	}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			gx, gy := x/cell, y/cell
			tx, ty := float64(x%cell)/cell, float64(y%cell)/cell
			i := (y*w + x) * 3
			for c := 0; c < 3; c++ {
				a := grid[gy*gw+gx][c]*(1-tx) + grid[gy*gw+gx+1][c]*tx
				b := grid[(gy+1)*gw+gx][c]*(1-tx) + grid[(gy+1)*gw+gx+1][c]*tx
				v := a*(1-ty) + b*ty
				img[i+c] = byteOf(50 + 150*v + 20*math.Sin(float64(x+2*y)*0.8))
			}
		}
	}
	return img
}

func byteOf(v float64) uint8 { return uint8(math.Max(0, math.Min(255, math.Round(v)))) }

func psnr(a, b []uint8) float64 {
	var se float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		se += d * d
	}
	mse := se / float64(len(a))
	if mse == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(255*255/mse)
}
