package colormap

// Heat maps v in [0, 1] to a colour, linearly between five stops: dark
// blue, cyan, green, yellow, red. Values outside [0, 1] are the caller's
// to clamp.
func Heat(v float64) (r, g, b uint8) {
	stops := [5][3]float64{{20, 20, 120}, {0, 170, 220}, {40, 190, 60}, {250, 220, 30}, {220, 30, 30}}
	x := v * 4
	i := int(x)
	if i >= 4 {
		i, x = 3, 4
	}
	f := x - float64(i)
	c := func(k int) uint8 { return uint8(stops[i][k] + f*(stops[i+1][k]-stops[i][k]) + 0.5) }
	return c(0), c(1), c(2)
}
