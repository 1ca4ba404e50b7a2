package infer

import "testing"

func TestResizer(t *testing.T) {
	// A 4x2 image with distinct values per channel.
	src := make([]uint8, 3*4*2)
	for i := range src {
		src[i] = uint8(10 * i)
	}
	at := func(img []uint8, w, x, y, c int) uint8 { return img[3*(y*w+x)+c] }
	tests := []struct {
		name       string
		dstW, dstH int
		want       func(x, y, c int) float64
	}{
		// Same size: returned unchanged.
		{"identity", 4, 2, func(x, y, c int) float64 { return float64(at(src, 4, x, y, c)) }},
		// Halving: destination centre (d+0.5)*2-0.5 = 2d+0.5 lies halfway
		// between source pixels 2d and 2d+1, so the result is their mean.
		{"half", 2, 1, func(x, y, c int) float64 {
			s := 0.0
			for dy := range 2 {
				for dx := range 2 {
					s += float64(at(src, 4, 2*x+dx, dy, c))
				}
			}
			return s / 4
		}},
		// Doubling: destination x maps to (x+0.5)/2-0.5; x=0 clamps to 0,
		// x=1 is 0.25 of the way from pixel 0 to 1.
		{"double", 8, 4, func(x, y, c int) float64 {
			pos := func(d, n int) (int, int, float64) {
				s := (float64(d)+0.5)/2 - 0.5
				if s < 0 {
					s = 0
				}
				a := int(s)
				b := min(a+1, n-1)
				return a, b, s - float64(a)
			}
			x0, x1, fx := pos(x, 4)
			y0, y1, fy := pos(y, 2)
			p := func(xx, yy int) float64 { return float64(at(src, 4, xx, yy, c)) }
			top := p(x0, y0) + fx*(p(x1, y0)-p(x0, y0))
			bot := p(x0, y1) + fx*(p(x1, y1)-p(x0, y1))
			return top + fy*(bot-top)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewResizer(tc.dstW, tc.dstH)
			out, err := r.Resize(src, 4, 2)
			if err != nil {
				t.Fatal(err)
			}
			for y := range tc.dstH {
				for x := range tc.dstW {
					for c := range 3 {
						want := tc.want(x, y, c)
						if got := float64(at(out, tc.dstW, x, y, c)); got < want-0.51 || got > want+0.51 {
							t.Fatalf("(%d,%d,%d) = %v, want %.2f", x, y, c, got, want)
						}
					}
				}
			}
			if allocs := testing.AllocsPerRun(10, func() { r.Resize(src, 4, 2) }); allocs != 0 {
				t.Fatalf("%v allocs per resize", allocs)
			}
		})
	}
	if _, err := NewResizer(2, 2).Resize(src[:10], 4, 2); err == nil {
		t.Fatal("short buffer accepted")
	}
}
