package mapgrid

import (
	"math"
	"testing"
)

// TestFitAndRemap: the letterbox rectangle of a 640x192 frame in a 256x256
// input (scale 0.4: 256x77 at row 89), and the frame-size resampling of a
// map that is linear in input coordinates, which bilinear interpolation
// reproduces exactly away from the clamped border.
func TestFitAndRemap(t *testing.T) {
	g := Fit(640, 192, 256, 256, Letterbox)
	if g.X0 != 0 || g.Y0 != 89 || g.CW != 256 || g.CH != 77 {
		t.Fatalf("letterbox %+v, want x0 0 y0 89 256x77", g)
	}
	if s := Fit(640, 192, 256, 256, Stretch); s.CW != 256 || s.CH != 256 || s.X0 != 0 || s.Y0 != 0 {
		t.Fatalf("stretch %+v", s)
	}
	if s := Fit(512, 512, 256, 256, Letterbox); !(s.CW == 256 && s.CH == 256) {
		t.Fatalf("same aspect letterbox %+v", s)
	}
	// A map at half the input resolution (128x128) holding u_input + 1000 v_input.
	const mw, mh = 128, 128
	m := make([]float32, mw*mh)
	for j := 0; j < mh; j++ {
		for i := 0; i < mw; i++ {
			u := (float64(i)+0.5)*256/mw - 0.5
			v := (float64(j)+0.5)*256/mh - 0.5
			m[j*mw+i] = float32(u + 1000*v)
		}
	}
	r := NewRemap(g, mw, mh)
	dst := make([]float32, 640*192)
	if err := r.Apply(m, dst); err != nil {
		t.Fatal(err)
	}
	for y := 0; y < 192; y++ {
		for x := 2; x < 638; x++ { // columns 0, 1, 638 and 639 sample left or right of the map: clamped
			u, v := g.ToInput(float64(x), float64(y))
			want := u + 1000*v
			if math.Abs(float64(dst[y*640+x])-want) > 0.05 {
				t.Fatalf("frame (%d,%d): %v, want %v", x, y, dst[y*640+x], want)
			}
		}
	}
	if g.InputPixel(0, 0) != 89*256 || g.InputPixel(639, 191) != (89+76)*256+255 {
		t.Fatalf("input pixels of the corners: %d %d", g.InputPixel(0, 0), g.InputPixel(639, 191))
	}
}
