package corrupt

import (
	"bytes"
	"image"
	"image/color"
	"math"
	"strings"
	"testing"
)

// testSet returns the natural-looking test frames used for severity checks.
func testSet(w, h int) [][]uint8 {
	return [][]uint8{roadScene(w, h), gradientEdges(w, h), texture(w, h)}
}

// randomTypes are the corruptions that draw random numbers.
var randomTypes = map[string]bool{
	"gaussian_noise": true, "shot_noise": true, "impulse_noise": true, "iso_noise": true,
	"glass_blur": true, "motion_blur": true, "snow": true, "frost": true, "fog": true,
	"dark": true, "elastic_transform": true,
}

func TestNamesAreTheSuite(t *testing.T) {
	want := []string{"gaussian_noise", "shot_noise", "impulse_noise", "iso_noise", "defocus_blur",
		"glass_blur", "motion_blur", "zoom_blur", "snow", "frost", "fog", "dark", "brightness",
		"contrast", "elastic_transform", "pixelate", "jpeg_compression", "color_quant"}
	got := Names()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	got[0] = "mutated"
	if Names()[0] != "gaussian_noise" {
		t.Fatal("Names() exposes internal state")
	}
}

// TestPSNRDecreasesWithSeverity: the mean PSNR against the clean frame over
// three synthetic frames strictly decreases from severity 1 to 5.
func TestPSNRDecreasesWithSeverity(t *testing.T) {
	const w, h = 160, 96
	imgs := testSet(w, h)
	c := NewCorruptor()
	out := make([]uint8, w*h*3)
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			var means [MaxSeverity]float64
			for s := 1; s <= MaxSeverity; s++ {
				for _, img := range imgs {
					if err := c.Apply(out, img, w, h, name, s, 42); err != nil {
						t.Fatal(err)
					}
					means[s-1] += psnr(img, out) / float64(len(imgs))
				}
			}
			t.Logf("mean PSNR by severity: %.2f", means)
			for s := 1; s < MaxSeverity; s++ {
				if !(means[s] < means[s-1]) {
					t.Errorf("PSNR does not decrease from severity %d (%.3f dB) to %d (%.3f dB)", s, means[s-1], s+1, means[s])
				}
			}
			if math.IsInf(means[0], 1) {
				t.Errorf("severity 1 leaves the images unchanged")
			}
		})
	}
}

func TestDeterministicBySeed(t *testing.T) {
	const w, h = 64, 40
	src := roadScene(w, h)
	a, b := make([]uint8, len(src)), make([]uint8, len(src))
	for _, name := range Names() {
		for s := 1; s <= MaxSeverity; s++ {
			// Two Corruptors, and one reused after other work, must agree.
			c1, c2 := NewCorruptor(), NewCorruptor()
			if err := c2.Apply(b, src, w, h, "fog", 5, 99); err != nil {
				t.Fatal(err)
			}
			if err := c1.Apply(a, src, w, h, name, s, 7); err != nil {
				t.Fatal(err)
			}
			if err := c2.Apply(b, src, w, h, name, s, 7); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Errorf("%s/%d: same seed gave different bytes", name, s)
			}
			if err := c2.Apply(b, src, w, h, name, s, 8); err != nil {
				t.Fatal(err)
			}
			if differ := !bytes.Equal(a, b); differ != randomTypes[name] {
				t.Errorf("%s/%d: different seed changed output = %v, want %v", name, s, differ, randomTypes[name])
			}
		}
	}
}

// TestSizesAndAliasing runs every corruption on odd, tiny and wide sizes
// (never square), with dst aliasing src giving the same bytes as separate
// buffers.
func TestSizesAndAliasing(t *testing.T) {
	sizes := [][2]int{{1, 1}, {2, 3}, {7, 5}, {3, 200}, {211, 17}, {640, 192}}
	c := NewCorruptor()
	for _, sz := range sizes {
		w, h := sz[0], sz[1]
		src := gradientEdges(w, h)
		for _, name := range Names() {
			s := 1 + (w+h)%MaxSeverity
			out := make([]uint8, len(src))
			if err := c.Apply(out, src, w, h, name, s, 3); err != nil {
				t.Fatalf("%s %dx%d: %v", name, w, h, err)
			}
			inplace := bytes.Clone(src)
			if err := c.Apply(inplace, inplace, w, h, name, s, 3); err != nil {
				t.Fatalf("%s %dx%d in place: %v", name, w, h, err)
			}
			if !bytes.Equal(out, inplace) {
				t.Errorf("%s %dx%d: in-place result differs from separate dst", name, w, h)
			}
		}
	}
}

func TestBadArguments(t *testing.T) {
	src := make([]uint8, 4*3*3)
	dst := make([]uint8, len(src))
	cases := []struct {
		name     string
		severity int
		w, h     int
		dst      []uint8
		wantErr  string
	}{
		{"no_such_corruption", 1, 4, 3, dst, `unknown corruption "no_such_corruption"`},
		{"", 1, 4, 3, dst, `unknown corruption ""`},
		{"fog", 0, 4, 3, dst, `"fog": severity 0 out of range 1..5`},
		{"fog", 6, 4, 3, dst, `"fog": severity 6 out of range 1..5`},
		{"contrast", 1, 5, 3, dst, "src has 36 bytes, want 45"},
		{"contrast", 1, 4, 3, dst[:5], "dst has 5 bytes, want 36"},
		{"contrast", 1, 0, 3, dst, "bad image size 0x3"},
		{"contrast", 1, -4, -3, dst, "bad image size -4x-3"},
	}
	for _, tc := range cases {
		err := Apply(tc.dst, src, tc.w, tc.h, tc.name, tc.severity, 1)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("Apply(%q, %d, %dx%d) error = %v, want containing %q", tc.name, tc.severity, tc.w, tc.h, err, tc.wantErr)
		}
	}
	if err := Validate("snow", 3); err != nil {
		t.Errorf("Validate(snow, 3) = %v", err)
	}
	if err := Validate("snow", 9); err == nil {
		t.Error("Validate(snow, 9) = nil")
	}
}

func constImage(w, h int, r, g, b uint8) []uint8 {
	img := make([]uint8, w*h*3)
	for i := 0; i < w*h; i++ {
		img[3*i], img[3*i+1], img[3*i+2] = r, g, b
	}
	return img
}

// TestConstantImageFixedPoints: every normalized averaging filter (and
// contrast, whose mean is the constant) maps a constant image to itself.
func TestConstantImageFixedPoints(t *testing.T) {
	const w, h = 37, 23
	src := constImage(w, h, 200, 90, 17)
	out := make([]uint8, len(src))
	for _, name := range []string{"contrast", "defocus_blur", "glass_blur", "motion_blur", "zoom_blur", "elastic_transform", "pixelate"} {
		for s := 1; s <= MaxSeverity; s++ {
			if err := Apply(out, src, w, h, name, s, 5); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, src) {
				t.Errorf("%s/%d on a constant image changed it (first pixel %v)", name, s, out[:3])
			}
		}
	}
}

// TestContrastKeepsMean: (x-m)k+m keeps the channel mean when nothing clips
// (values only move towards the mean), up to rounding (0.5 level).
func TestContrastKeepsMean(t *testing.T) {
	const w, h = 160, 96
	src := roadScene(w, h)
	out := make([]uint8, len(src))
	mean := func(img []uint8, ch int) float64 {
		var s float64
		for i := ch; i < len(img); i += 3 {
			s += float64(img[i])
		}
		return s / float64(w*h)
	}
	for s := 1; s <= MaxSeverity; s++ {
		if err := Apply(out, src, w, h, "contrast", s, 1); err != nil {
			t.Fatal(err)
		}
		for ch := 0; ch < 3; ch++ {
			if d := math.Abs(mean(out, ch) - mean(src, ch)); d > 0.5 {
				t.Errorf("severity %d channel %d: mean moved by %.3f levels", s, ch, d)
			}
		}
		// The spread shrinks by exactly k (up to rounding).
		k := contrastFactor[s-1]
		m := mean(src, 0)
		v := float64(src[0]) - m
		want := m + v*k
		if d := math.Abs(float64(out[0]) - want); d > 0.51 {
			t.Errorf("severity %d: pixel 0 = %d, want %.2f", s, out[0], want)
		}
	}
}

// hsvRoundTrip is an independent textbook RGB->HSV->RGB with V raised by d.
func hsvRoundTrip(r, g, b, d float64) (float64, float64, float64) {
	mx := math.Max(r, math.Max(g, b))
	mn := math.Min(r, math.Min(g, b))
	v := mx
	s := 0.0
	if mx > 0 {
		s = (mx - mn) / mx
	}
	var hh float64
	if mx > mn {
		switch mx {
		case r:
			hh = math.Mod((g-b)/(mx-mn), 6)
		case g:
			hh = (b-r)/(mx-mn) + 2
		default:
			hh = (r-g)/(mx-mn) + 4
		}
	}
	if hh < 0 {
		hh += 6
	}
	v = math.Min(v+d, 1)
	c := v * s
	x := c * (1 - math.Abs(math.Mod(hh, 2)-1))
	m := v - c
	var rr, gg, bb float64
	switch int(hh) % 6 {
	case 0:
		rr, gg, bb = c, x, 0
	case 1:
		rr, gg, bb = x, c, 0
	case 2:
		rr, gg, bb = 0, c, x
	case 3:
		rr, gg, bb = 0, x, c
	case 4:
		rr, gg, bb = x, 0, c
	default:
		rr, gg, bb = c, 0, x
	}
	return rr + m, gg + m, bb + m
}

func TestBrightnessMatchesHSV(t *testing.T) {
	// Gray pixels: V = g, S = 0, so the result is gray min(g + d, 1).
	for s := 1; s <= MaxSeverity; s++ {
		d := brightnessDelta[s-1]
		for g := 0; g < 256; g++ {
			src := []uint8{uint8(g), uint8(g), uint8(g)}
			out := make([]uint8, 3)
			if err := Apply(out, src, 1, 1, "brightness", s, 0); err != nil {
				t.Fatal(err)
			}
			want := math.Min(float64(g)/255+d, 1) * 255 // exact; rounding may go either way at .5
			if math.Abs(float64(out[0])-want) > 0.5001 || out[1] != out[0] || out[2] != out[0] {
				t.Fatalf("severity %d gray %d -> %v, want gray %.2f", s, g, out, want)
			}
		}
	}
	// Colours: compare with the textbook HSV round trip.
	src := texture(64, 32)
	out := make([]uint8, len(src))
	for s := 1; s <= MaxSeverity; s++ {
		if err := Apply(out, src, 64, 32, "brightness", s, 0); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(src); i += 3 {
			r, g, b := hsvRoundTrip(float64(src[i])/255, float64(src[i+1])/255, float64(src[i+2])/255, brightnessDelta[s-1])
			for ch, v := range []float64{r, g, b} {
				if d := math.Abs(float64(out[i+ch]) - v*255); d > 0.51 {
					t.Fatalf("severity %d pixel %v channel %d = %d, HSV gives %.2f", s, src[i:i+3], ch, out[i+ch], v*255)
				}
			}
		}
	}
}

func TestPixelateConstantAndBlocks(t *testing.T) {
	const w, h = 50, 30
	src := constImage(w, h, 13, 130, 250)
	out := make([]uint8, len(src))
	for s := 1; s <= MaxSeverity; s++ {
		if err := Apply(out, src, w, h, "pixelate", s, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, src) {
			t.Fatalf("severity %d changed a constant image", s)
		}
	}
	// Severity 5 (scale .25) on a 4x-periodic column pattern 0,0,255,255:
	// each 4-pixel box has mean 127.5 -> 128 everywhere.
	const pw, ph = 16, 8
	pat := make([]uint8, pw*ph*3)
	for y := 0; y < ph; y++ {
		for x := 0; x < pw; x++ {
			if x%4 >= 2 {
				for ch := 0; ch < 3; ch++ {
					pat[(y*pw+x)*3+ch] = 255
				}
			}
		}
	}
	out = make([]uint8, len(pat))
	if err := Apply(out, pat, pw, ph, "pixelate", 5, 0); err != nil {
		t.Fatal(err)
	}
	for i, v := range out {
		if v != 128 {
			t.Fatalf("pixel byte %d = %d, want 128", i, v)
		}
	}
}

func TestColorQuantAllLevels(t *testing.T) {
	src := make([]uint8, 256*3)
	for v := range 256 {
		src[3*v], src[3*v+1], src[3*v+2] = uint8(v), uint8(v), uint8(v)
	}
	out := make([]uint8, len(src))
	for s := 1; s <= MaxSeverity; s++ {
		bits := 6 - s
		if err := Apply(out, src, 256, 1, "color_quant", s, 0); err != nil {
			t.Fatal(err)
		}
		step := 1 << (8 - bits)
		levels := map[uint8]bool{}
		for v := range 256 {
			want := uint8(v / step * step)
			if out[3*v] != want {
				t.Fatalf("severity %d (%d bits): %d -> %d, want %d", s, bits, v, out[3*v], want)
			}
			levels[out[3*v]] = true
		}
		if len(levels) != 1<<bits {
			t.Errorf("severity %d: %d levels, want %d", s, len(levels), 1<<bits)
		}
	}
}

// moments returns mean and standard deviation of out-src over the image.
func moments(out, src []uint8) (mean, std float64) {
	var s, s2 float64
	for i := range out {
		d := float64(out[i]) - float64(src[i])
		s += d
		s2 += d * d
	}
	n := float64(len(out))
	mean = s / n
	return mean, math.Sqrt(s2/n - mean*mean)
}

// TestNoiseStatistics checks the noise models against their closed forms on
// a mid-gray image where nothing clips: Gaussian sd sigma*255; Poisson
// Poisson(x c)/c has mean x and sd sqrt(x/c)*255; salt and pepper replaces
// a fraction `amount` of values.
func TestNoiseStatistics(t *testing.T) {
	const w, h = 200, 150 // 90000 values: sampling error of sd < 1%
	src := constImage(w, h, 128, 128, 128)
	out := make([]uint8, len(src))
	x := 128.0 / 255
	for s := 1; s <= 2; s++ {
		if err := Apply(out, src, w, h, "gaussian_noise", s, 11); err != nil {
			t.Fatal(err)
		}
		m, sd := moments(out, src)
		want := gaussianSigma[s-1] * 255
		if math.Abs(m) > 0.3 || math.Abs(sd-want)/want > 0.03 {
			t.Errorf("gaussian_noise/%d: mean %.3f sd %.3f, want 0 and %.3f", s, m, sd, want)
		}
	}
	for s := 1; s <= MaxSeverity; s++ {
		if err := Apply(out, src, w, h, "shot_noise", s, 12); err != nil {
			t.Fatal(err)
		}
		c := shotRate[s-1]
		// Clipping at 1 only matters when x*c has real mass above c.
		if c < 10 {
			continue
		}
		m, sd := moments(out, src)
		want := math.Sqrt(x/c) * 255
		if math.Abs(m) > 0.5 || math.Abs(sd-want)/want > 0.03 {
			t.Errorf("shot_noise/%d: mean %.3f sd %.3f, want 0 and %.3f", s, m, sd, want)
		}
	}
	for s := 1; s <= MaxSeverity; s++ {
		if err := Apply(out, src, w, h, "impulse_noise", s, 13); err != nil {
			t.Fatal(err)
		}
		var salt, pepper int
		for _, v := range out {
			switch v {
			case 255:
				salt++
			case 0:
				pepper++
			case 128:
			default:
				t.Fatalf("impulse_noise produced value %d", v)
			}
		}
		n := float64(len(out))
		a := impulseAmount[s-1]
		tol := 4 * math.Sqrt(a*(1-a)/n)
		if got := float64(salt+pepper) / n; math.Abs(got-a) > tol {
			t.Errorf("impulse_noise/%d: fraction %.4f, want %.4f", s, got, a)
		}
		if math.Abs(float64(salt-pepper)) > 4*math.Sqrt(float64(salt+pepper)) {
			t.Errorf("impulse_noise/%d: salt %d vs pepper %d not balanced", s, salt, pepper)
		}
	}
}

func TestPoissonTableMoments(t *testing.T) {
	for _, rate := range []float64{3, 60, 600} {
		tab := newPoissonTable(rate)
		for _, v := range []uint8{0, 1, 77, 255} {
			lam := float64(v) / 255 * rate
			// Exact mean and variance from the table's own pmf.
			cdf := tab.cdf[tab.off[v]:tab.off[int(v)+1]]
			var mean, m2, prev float64
			for k, cv := range cdf {
				p := cv - prev
				prev = cv
				mean += p * float64(k)
				m2 += p * float64(k) * float64(k)
			}
			variance := m2 - mean*mean
			if math.Abs(mean-lam) > 1e-6*(1+lam) || math.Abs(variance-lam) > 1e-6*(1+lam) {
				t.Errorf("rate %g level %d: mean %.6f var %.6f, want %.6f", rate, v, mean, variance, lam)
			}
			if 1-cdf[len(cdf)-1] > 1e-12 {
				t.Errorf("rate %g level %d: table misses mass %.3g", rate, v, 1-cdf[len(cdf)-1])
			}
		}
	}
}

// TestZoomAxisIdentity: zoom factor 1 samples every pixel at itself.
func TestZoomAxisIdentity(t *testing.T) {
	for _, n := range []int{1, 2, 17, 640} {
		i0 := make([]int32, n)
		f := make([]float32, n)
		zoomAxis(n, 1, i0, f)
		for o := range n {
			if int(i0[o]) != o && !(o == n-1 && f[o] == 0) || (f[o] != 0) {
				t.Fatalf("n=%d: output %d samples %d+%g", n, o, i0[o], f[o])
			}
		}
	}
	// Zoom 2 on 8 pixels: crop 4 centred (2..5), zoomed to 8 samples at
	// 2 + o*3/7, so the centre stays in the centre.
	i0 := make([]int32, 8)
	f := make([]float32, 8)
	zoomAxis(8, 2, i0, f)
	for o := range 8 {
		want := 2 + float64(o)*3/7
		got := float64(i0[o]) + float64(f[o])
		if math.Abs(got-want) > 1e-6 {
			t.Errorf("zoom 2: output %d samples %.4f, want %.4f", o, got, want)
		}
	}
}

func TestBorderIndex(t *testing.T) {
	cases := []struct {
		b    border
		n    int
		in   []int
		want []int
	}{
		{borderClamp, 4, []int{-2, -1, 0, 3, 4, 9}, []int{0, 0, 0, 3, 3, 3}},
		{borderSymmetric, 4, []int{-2, -1, 0, 3, 4, 5, 8}, []int{1, 0, 0, 3, 3, 2, 0}},
		{borderReflect101, 4, []int{-2, -1, 0, 3, 4, 5, 6}, []int{2, 1, 0, 3, 2, 1, 0}},
		{borderReflect101, 1, []int{-3, 5}, []int{0, 0}},
	}
	for _, tc := range cases {
		for i, x := range tc.in {
			if got := tc.b.index(x, tc.n); got != tc.want[i] {
				t.Errorf("border %d n=%d index(%d) = %d, want %d", tc.b, tc.n, x, got, tc.want[i])
			}
		}
	}
}

func TestImageRoundTrip(t *testing.T) {
	const w, h = 9, 4
	src := texture(w, h)
	img := RGBToImage(src, w, h, nil)
	rgb, gw, gh := ImageToRGB(img, nil)
	if gw != w || gh != h || !bytes.Equal(rgb, src) {
		t.Fatal("NRGBA round trip changed the pixels")
	}
	// A paletted (generic path) image and an offset sub-image.
	pal := image.NewPaletted(image.Rect(3, 2, 5, 4), color.Palette{color.RGBA{1, 2, 3, 255}, color.RGBA{200, 100, 50, 255}})
	pal.SetColorIndex(4, 3, 1)
	rgb, gw, gh = ImageToRGB(pal, nil)
	if gw != 2 || gh != 2 || !bytes.Equal(rgb, []uint8{1, 2, 3, 1, 2, 3, 1, 2, 3, 200, 100, 50}) {
		t.Fatalf("paletted -> %v (%dx%d)", rgb, gw, gh)
	}
	sub := img.SubImage(image.Rect(1, 1, 3, 2)).(*image.NRGBA)
	rgb, _, _ = ImageToRGB(sub, nil)
	if !bytes.Equal(rgb, src[(1*w+1)*3:(1*w+3)*3]) {
		t.Fatal("sub-image conversion read the wrong pixels")
	}
	c := NewCorruptor()
	out, err := c.ApplyImage(img, "color_quant", 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	if out.Bounds() != img.Bounds() || out.Pix[0] != src[0]&0x80 || out.Pix[3] != 255 {
		t.Fatalf("ApplyImage: bounds %v first pixel %v", out.Bounds(), out.Pix[:4])
	}
}

// TestPoissonSampleInvertsCDF: sample(u) is the smallest k with CDF(k) > u,
// checked against a plain linear search for a grid of u.
func TestPoissonSampleInvertsCDF(t *testing.T) {
	tab := newPoissonTable(600)
	for _, v := range []uint8{0, 3, 128, 255} {
		cdf := tab.cdf[tab.off[v]:tab.off[int(v)+1]]
		for i := 0; i < 1000; i++ {
			u := (float64(i) + 0.37) / 1000
			want := 0
			for want < len(cdf)-1 && cdf[want] <= u {
				want++
			}
			if got := tab.sample(v, u); got != want {
				t.Fatalf("level %d u=%.4f: sample %d, want %d", v, u, got, want)
			}
		}
	}
}
