// Command texturecheck measures candidate pooled texture statistics of
// pictures for the domain monitor (issue 39: can a cheap statistic see
// jpeg_compression, elastic_transform and pixelate at severity 3?). Per set
// and statistic it prints the frame-level AUC of |z| (z standardized by a
// clean fit set; the clean test set negative, the set positive) and the
// set's mean, or with SIGMA=1 the mean shift and spread in fit standard
// deviations. A set named NAME@qQ is re-encoded as JPEG at quality Q first
// (a camera's M-JPEG stream). Figures: docs/alerts.md#choosing-the-statistic.
//
//	go run ./internal/texturecheck -fit FIT -test TEST NAME=DIR ... NAME@q85=DIR
package main

import (
	"bytes"
	"flag"
	"fmt"
	"image"
	"image/draw"
	"image/jpeg"
	_ "image/png"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// statNames are the candidates, in stats' order: blockiness across 8-pixel
// columns and rows (log ratio of the mean |difference| at block borders to
// elsewhere), the share of zero horizontal differences of G, log(mean
// |second difference| / mean |first difference|), log(E dx^2 / (E|dx|)^2),
// log mean |second difference|, log mean |dx|, the share of zero
// differences followed by a non-zero one, the share of strong edges on
// block borders.
func statNames() []string {
	return []string{"blockH", "blockV", "zeroFracG", "lapRatio", "gradKurt", "hfLogLap", "logGrad", "zero2Frac", "blockEdgeFrac"}
}

func stats(img *image.RGBA) []float64 {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	y := make([]float64, w*h)
	g := make([]int, w*h)
	for j := 0; j < h; j++ {
		for i := 0; i < w; i++ {
			p := img.Pix[j*img.Stride+4*i:]
			y[j*w+i] = (float64(p[0]) + float64(p[1]) + float64(p[2])) / 3
			g[j*w+i] = int(p[1])
		}
	}
	var bH, oH, nbH, noH float64
	var bV, oV, nbV, noV float64
	var zero, nz, zero2 float64
	var sdx, sdx2, slap, nl float64
	var edgeB, edgeAll float64
	for j := 0; j < h; j++ {
		for i := 0; i+1 < w; i++ {
			d := math.Abs(y[j*w+i+1] - y[j*w+i])
			if i%8 == 7 {
				bH += d
				nbH++
			} else {
				oH += d
				noH++
			}
			if g[j*w+i+1] == g[j*w+i] {
				zero++
				if i+2 < w && g[j*w+i+2] != g[j*w+i+1] {
					zero2++
				}
			}
			nz++
			sdx += d
			sdx2 += d * d
			if d > 8 {
				edgeAll++
				if i%8 == 7 {
					edgeB++
				}
			}
			if i >= 1 {
				slap += math.Abs(y[j*w+i+1] - 2*y[j*w+i] + y[j*w+i-1])
				nl++
			}
		}
	}
	for j := 0; j+1 < h; j++ {
		for i := 0; i < w; i++ {
			d := math.Abs(y[(j+1)*w+i] - y[j*w+i])
			if j%8 == 7 {
				bV += d
				nbV++
			} else {
				oV += d
				noV++
			}
		}
	}
	md := sdx / nz
	return []float64{
		math.Log((bH/nbH + 1e-3) / (oH/noH + 1e-3)),
		math.Log((bV/nbV + 1e-3) / (oV/noV + 1e-3)),
		zero / nz,
		math.Log((slap/nl + 1e-3) / (md + 1e-3)),
		math.Log((sdx2/nz + 1e-6) / (md*md + 1e-6)),
		math.Log(slap/nl + 1e-3),
		math.Log(md + 1e-3),
		zero2 / nz,
		(edgeB + 1) / (edgeAll + 8),
	}
}

func load(path string) (*image.RGBA, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	im, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	r := image.NewRGBA(im.Bounds())
	draw.Draw(r, r.Rect, im, im.Bounds().Min, draw.Src)
	return r, nil
}

func jpegRound(img *image.RGBA, q int) (*image.RGBA, error) {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: q}); err != nil {
		return nil, err
	}
	im, err := jpeg.Decode(&buf)
	if err != nil {
		return nil, err
	}
	r := image.NewRGBA(im.Bounds())
	draw.Draw(r, r.Rect, im, im.Bounds().Min, draw.Src)
	return r, nil
}

func files(dir string) []string {
	var out []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && (strings.HasSuffix(p, ".png") || strings.HasSuffix(p, ".jpg")) && strings.Contains(p, "/image_02/data/") {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

func setStats(dir string, q int) [][]float64 {
	var out [][]float64
	for _, f := range files(dir) {
		im, err := load(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, f, err)
			continue
		}
		if q > 0 {
			if im, err = jpegRound(im, q); err != nil {
				fmt.Fprintln(os.Stderr, f, err)
				continue
			}
		}
		out = append(out, stats(im))
	}
	return out
}

// auc: P(pos > neg) + 0.5 P(=)
func auc(neg, pos []float64) float64 {
	var s float64
	for _, p := range pos {
		for _, n := range neg {
			if p > n {
				s++
			} else if p == n {
				s += 0.5
			}
		}
	}
	return s / float64(len(neg)*len(pos))
}

func main() {
	fit := flag.String("fit", "", "clean fit set; DIR@qQ re-encodes it as JPEG at quality Q; several, comma-separated, are pooled")
	test := flag.String("test", "", "clean test set (the negatives)")
	flag.Parse()
	// -fit DIR[,DIR@qQ...]: the fit pictures, several sets pooled (a
	// record of frames as cameras deliver them: raw and re-encoded).
	var F [][]float64
	for _, spec := range strings.Split(*fit, ",") {
		dir, qs, _ := strings.Cut(spec, "@q")
		q := 0
		if qs != "" {
			fmt.Sscan(qs, &q)
		}
		F = append(F, setStats(dir, q)...)
	}
	T := setStats(*test, 0)
	if len(F) < 2 || len(T) < 1 {
		fmt.Fprintf(os.Stderr, "texturecheck: %d fit and %d test pictures under %q and %q (want */image_02/data/*.png)\n", len(F), len(T), *fit, *test)
		os.Exit(2)
	}
	names := statNames()
	k := len(names)
	mean, std := make([]float64, k), make([]float64, k)
	for j := 0; j < k; j++ {
		for _, v := range F {
			mean[j] += v[j]
		}
		mean[j] /= float64(len(F))
		for _, v := range F {
			std[j] += (v[j] - mean[j]) * (v[j] - mean[j])
		}
		std[j] = math.Sqrt(std[j]/float64(len(F)-1)) + 1e-12
	}
	score := func(S [][]float64, j int) []float64 {
		o := make([]float64, len(S))
		for i, v := range S {
			o[i] = math.Abs(v[j]-mean[j]) / std[j]
		}
		return o
	}
	fmt.Printf("%-22s %4s", "set", "n")
	for _, n := range names {
		fmt.Printf(" %13s", n)
	}
	fmt.Println()
	fmt.Printf("%-22s %4d", "fit mean (std)", len(F))
	for j := range names {
		fmt.Printf(" %6.3f(%5.3f)", mean[j], std[j])
	}
	fmt.Println()
	sets := flag.Args()
	for _, a := range sets {
		name, dir, _ := strings.Cut(a, "=")
		q := 0
		if _, qs, ok := strings.Cut(name, "@q"); ok {
			fmt.Sscan(qs, &q)
		}
		S := setStats(dir, q)
		if len(S) < 2 {
			fmt.Fprintf(os.Stderr, "texturecheck: %s: %d pictures under %q\n", name, len(S), dir)
			continue
		}
		fmt.Printf("%-22s %4d", name, len(S))
		for j := range names {
			m := 0.0
			for _, v := range S {
				m += v[j]
			}
			m /= float64(len(S))
			sd := 0.0
			for _, v := range S {
				sd += (v[j] - m) * (v[j] - m)
			}
			sd = math.Sqrt(sd / float64(len(S)-1))
			if os.Getenv("SIGMA") != "" {
				fmt.Printf(" %5.1fs(%4.1f)", (m-mean[j])/std[j], sd/std[j])
			} else {
				fmt.Printf(" %6.3f/%5.3f", auc(score(T, j), score(S, j)), m)
			}
		}
		fmt.Println()
	}
}
