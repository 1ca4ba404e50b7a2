package offline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	_ "image/jpeg" // decode JPEG inputs
	"image/png"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/didoedge/didoedge/camera/intrinsics"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// Encodings of the 16-bit map PNGs `didoedge model run --images` writes.
const (
	// EncodingDepth is KITTI's: metres x 256, 0 = no depth.
	EncodingDepth = "uint16 = round(depth_m * 256), 0 = no depth (KITTI)"
	// EncodingRelativeDepth: a relative model's inverse depth r, min-max
	// scaled per image (the image's min and max are in summary.json).
	EncodingRelativeDepth = "uint16 = 1 + round((r - r_min) / (r_max - r_min) * 65534), r relative inverse depth (larger is nearer); 0 = invalid"
	// EncodingScale is the Laplace b in metres x 256.
	EncodingScale = "uint16 = round(b_m * 256)"
	// EncodingRelativeScale is a relative model's b/depth x 10000.
	EncodingRelativeScale = "uint16 = round(b_relative * 10000)"
	// EncodingEpistemic is K/S x 65535.
	EncodingEpistemic = "uint16 = round(K/S * 65535)"
)

// ImageRunConfig configures RunImages.
type ImageRunConfig struct {
	// Images is a directory (every .png, .jpg, .jpeg in it, sorted) or a
	// glob pattern.
	Images string
	Out    string
	// The depth model and its AuxUE with their IO specs.
	Depth, DepthSpec, AuxUE, AuxUESpec string
	Inference                          onnxrt.Config
	// Intrinsics of the camera that took the images (nil: unknown); they
	// scale to each image's size, and a depth model with canonical_focal
	// needs them.
	Intrinsics *intrinsics.Intrinsics
	Log        *slog.Logger
}

// MapStats summarizes one map over its valid pixels.
type MapStats struct {
	Valid                         int     `json:"valid_pixels"`
	Mean, Min, Max, P05, P50, P95 float64 `json:"-"`
}

// MarshalJSON writes the statistics with null for figures without pixels.
func (m MapStats) MarshalJSON() ([]byte, error) {
	f := func(v float64) any {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return v
	}
	return json.Marshal(map[string]any{"valid_pixels": m.Valid, "mean": f(m.Mean), "min": f(m.Min), "max": f(m.Max),
		"p05": f(m.P05), "p50": f(m.P50), "p95": f(m.P95)})
}

// ImageSummary is one image's entry of summary.json.
type ImageSummary struct {
	Image         string            `json:"image"`
	Width, Height int               `json:"-"`
	Size          string            `json:"size"`
	Files         map[string]string `json:"files"`
	Depth         MapStats          `json:"depth"`
	Scale         MapStats          `json:"scale"`
	Epistemic     MapStats          `json:"epistemic"`
	// Intrinsics are the camera's, scaled to this image (nil: none given).
	Intrinsics *intrinsics.Intrinsics `json:"intrinsics,omitempty"`
	// FocalFactor is what a canonical-camera depth output was multiplied
	// by (f_input / canonical_focal); 0 when the output does not need it.
	FocalFactor float64 `json:"focal_factor,omitempty"`
}

// ImageRunSummary is summary.json.
type ImageRunSummary struct {
	DepthModel  string `json:"depth_model"`
	DepthSHA256 string `json:"depth_sha256"`
	AuxUEModel  string `json:"auxue_model"`
	AuxUESHA256 string `json:"auxue_sha256"`
	Provider    string `json:"provider"`
	Input       string `json:"model_input"`
	Resize      string `json:"resize"`
	Relative    bool   `json:"relative"`
	// Depth is the depth output read and its meaning, as the spec says
	// (or the finest map, when the spec names none).
	DepthOutput string                 `json:"depth_output"`
	Meaning     string                 `json:"depth_meaning"`
	InputType   string                 `json:"input_type"`
	Intrinsics  *intrinsics.Intrinsics `json:"intrinsics,omitempty"`
	Encoding    map[string]string      `json:"encoding"`
	Images      []ImageSummary         `json:"images"`
}

// ListImages expands a directory or a glob into image files, sorted. A
// directory's pictures may be symbolic links to pictures (followed); links
// to directories and dangling links are skipped.
func ListImages(pattern string) ([]string, error) {
	var paths []string
	if st, err := os.Stat(pattern); err == nil && st.IsDir() {
		entries, err := os.ReadDir(pattern)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if !dataset.IsImageName(e.Name()) {
				continue
			}
			p := filepath.Join(pattern, e.Name())
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				paths = append(paths, p)
			}
		}
	} else {
		var err error
		if paths, err = filepath.Glob(pattern); err != nil {
			return nil, fmt.Errorf("images %q: %w", pattern, err)
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("images %q: no .png, .jpg or .jpeg file (give a directory or a glob such as 'frames/*.png')", pattern)
	}
	slices.Sort(paths)
	return paths, nil
}

// maxImageBytes bounds the file ReadImageRGB8 reads.
const maxImageBytes = 256 << 20

// ReadImageRGB8 decodes a PNG or JPEG into interleaved RGB8; the file and
// the size its header announces are bounded before any pixel is decoded
// (dataset.DecodeRGBImage).
func ReadImageRGB8(path string) (rgb []uint8, w, h int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxImageBytes+1))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("read %q: %w", path, err)
	}
	if len(data) > maxImageBytes {
		return nil, 0, 0, fmt.Errorf("image %q: larger than %d bytes", path, maxImageBytes)
	}
	w, h, rgb, err = dataset.DecodeRGBImage(data)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("decode %q: %w", path, err)
	}
	if w > 1<<14 || h > 1<<14 {
		return nil, 0, 0, fmt.Errorf("image %q: size %dx%d out of range", path, w, h)
	}
	return rgb, w, h, nil
}

// RunImages runs the depth model and its AuxUE on every image and writes,
// per image, the depth, Laplace scale and epistemic maps as 16-bit PNGs
// at the image's size (Encoding*), a colour panel (image, depth,
// aleatoric, epistemic, each map with its colour legend) and summary.json
// (per-image means and quantiles).
func RunImages(ctx context.Context, cfg ImageRunConfig) (*ImageRunSummary, error) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	paths, err := ListImages(cfg.Images)
	if err != nil {
		return nil, err
	}
	if cfg.Out == "" {
		return nil, errors.New("model run: no output directory")
	}
	models, err := OpenModelPair(ctx, cfg.Depth, cfg.DepthSpec, cfg.AuxUE, cfg.AuxUESpec, cfg.Inference, log)
	if err != nil {
		return nil, err
	}
	defer models.Close()
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, fmt.Errorf("model run: %w", err)
	}
	ds, as := models.DepthSession(), models.AuxUESession()
	iw, ih := models.InputSize()
	rel := models.Relative()
	sum := &ImageRunSummary{DepthModel: cfg.Depth, DepthSHA256: ds.SHA256(), AuxUEModel: cfg.AuxUE, AuxUESHA256: as.SHA256(),
		Provider: ds.Provider(), Input: fmt.Sprintf("%dx%d", iw, ih), Resize: ds.Spec().ResizeMode(), Relative: rel,
		Encoding:    map[string]string{"depth": EncodingDepth, "scale": EncodingScale, "epistemic": EncodingEpistemic},
		DepthOutput: ds.Spec().Depth.Name, Meaning: ds.Spec().Depth.Meaning, InputType: ds.InputType(0), Intrinsics: cfg.Intrinsics}
	if in := cfg.Intrinsics; in != nil {
		if err := models.SetFocal(in.Fx, in.Width); err != nil {
			return nil, fmt.Errorf("model run: %w", err)
		}
	}
	if rel {
		sum.Encoding["depth"], sum.Encoding["scale"] = EncodingRelativeDepth, EncodingRelativeScale
	}
	seen := map[string]bool{}
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rgb, w, h, err := ReadImageRGB8(p)
		if err != nil {
			return nil, err
		}
		m, err := models.Infer(ctx, rgb, w, h)
		if err != nil {
			return nil, fmt.Errorf("model run %s: %w", p, err)
		}
		base := strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))
		if seen[base] {
			return nil, fmt.Errorf("model run: two images are named %q (outputs would collide)", base)
		}
		seen[base] = true
		is := ImageSummary{Image: p, Width: w, Height: h, Size: fmt.Sprintf("%dx%d", w, h), Files: map[string]string{}}
		if in := cfg.Intrinsics; in != nil {
			sc := in.Scaled(w, h)
			is.Intrinsics = &sc
		}
		if models.NeedsFocal() {
			is.FocalFactor = models.FocalFactor()
		}
		depthValid := func(v float32) bool { return v > 0 && v-v == 0 }
		if rel {
			depthValid = func(v float32) bool { return v-v == 0 }
		}
		is.Depth = stats(m.Depth, depthValid)
		is.Scale = stats(m.Scale, func(v float32) bool { return v >= 0 && v-v == 0 })
		is.Epistemic = stats(m.Epistemic, func(v float32) bool { return v-v == 0 })
		depth16 := make([]uint16, w*h)
		switch {
		case rel:
			span := is.Depth.Max - is.Depth.Min
			for i, v := range m.Depth {
				if v-v == 0 && span > 0 {
					depth16[i] = uint16(1 + math.Round((float64(v)-is.Depth.Min)/span*65534))
				}
			}
		default:
			for i, v := range m.Depth {
				if depthValid(v) {
					depth16[i] = uint16(math.Min(math.Round(float64(v)*256), 65535))
				}
			}
		}
		scaleK := 256.0
		if rel {
			scaleK = 10000
		}
		scale16, epis16 := make([]uint16, w*h), make([]uint16, w*h)
		for i := range scale16 {
			if b := float64(m.Scale[i]); b >= 0 {
				scale16[i] = uint16(math.Min(math.Round(b*scaleK), 65535))
			}
			if e := float64(m.Epistemic[i]); e >= 0 {
				epis16[i] = uint16(math.Min(math.Round(e*65535), 65535))
			}
		}
		for _, f := range []struct {
			key string
			pix []uint16
		}{{"depth", depth16}, {"scale", scale16}, {"epistemic", epis16}} {
			path := filepath.Join(cfg.Out, base+"_"+f.key+".png")
			if err := writeGray16(path, w, h, f.pix); err != nil {
				return nil, err
			}
			is.Files[f.key] = path
		}
		panel := filepath.Join(cfg.Out, base+"_panel.png")
		if err := writePanel(panel, rgb, w, h, m, rel); err != nil {
			return nil, err
		}
		is.Files["panel"] = panel
		sum.Images = append(sum.Images, is)
		log.Info("model run", "image", p, "size", is.Size, "depth_mean", is.Depth.Mean, "epistemic_mean", is.Epistemic.Mean)
	}
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(cfg.Out, "summary.json"), append(b, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("model run: %w", err)
	}
	return sum, nil
}

// stats computes a map's statistics over the pixels valid says are valid.
func stats(v []float32, valid func(float32) bool) MapStats {
	var vals []float64
	var s float64
	for _, x := range v {
		if valid(x) {
			vals = append(vals, float64(x))
			s += float64(x)
		}
	}
	st := MapStats{Valid: len(vals), Mean: math.NaN(), Min: math.NaN(), Max: math.NaN(), P05: math.NaN(), P50: math.NaN(), P95: math.NaN()}
	if len(vals) == 0 {
		return st
	}
	slices.Sort(vals)
	q := func(p float64) float64 { return vals[min(len(vals)-1, int(p*float64(len(vals))))] }
	st.Mean, st.Min, st.Max = s/float64(len(vals)), vals[0], vals[len(vals)-1]
	st.P05, st.P50, st.P95 = q(0.05), q(0.5), q(0.95)
	return st
}

func writeGray16(path string, w, h int, pix []uint16) error {
	img := image.NewGray16(image.Rect(0, 0, w, h))
	for i, v := range pix {
		img.Pix[2*i], img.Pix[2*i+1] = uint8(v>>8), uint8(v)
	}
	return writePNG(path, img)
}

func writePNG(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("model run: %w", err)
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return fmt.Errorf("write %q: %w", path, err)
	}
	return f.Close()
}

// viridis stops (matplotlib's viridis at 0, 0.25, 0.5, 0.75, 1).
var viridis = [5][3]float64{{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}}

// colormap maps t in [0, 1] to viridis, linearly between the stops.
func colormap(t float64) color.RGBA {
	t = math.Max(0, math.Min(1, t))
	if math.IsNaN(t) {
		return color.RGBA{0, 0, 0, 255}
	}
	k := math.Min(t*4, 3.999999)
	i := int(k)
	f := k - float64(i)
	a, b := viridis[i], viridis[i+1]
	return color.RGBA{uint8(a[0] + f*(b[0]-a[0])), uint8(a[1] + f*(b[1]-a[1])), uint8(a[2] + f*(b[2]-a[2])), 255}
}

// legendH is the height of the legend strip under each tile.
const legendH = 42

// writePanel draws the image and the three maps in a 2 x 2 grid, each map
// with its legend: title, colour bar and the values at its ends. Depth is
// coloured by inverse depth (near is bright) between the 2nd and 98th
// percentiles; b between 0 and its 98th percentile; K/S on [0, 1].
func writePanel(path string, rgb []uint8, w, h int, m infer.Maps, rel bool) error {
	pw, ph := 2*w, 2*(h+legendH)
	img := image.NewRGBA(image.Rect(0, 0, pw, ph))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.RGBA{255, 255, 255, 255}}, image.Point{}, draw.Src)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			o := 3 * (y*w + x)
			img.SetRGBA(x, y, color.RGBA{rgb[o], rgb[o+1], rgb[o+2], 255})
		}
	}
	label(img, 4, h+13, fmt.Sprintf("image %dx%d", w, h))
	pct := func(v []float32, valid func(float32) bool, p float64) float64 {
		var vals []float64
		for _, x := range v {
			if valid(x) {
				vals = append(vals, float64(x))
			}
		}
		if len(vals) == 0 {
			return math.NaN()
		}
		slices.Sort(vals)
		return vals[min(len(vals)-1, int(p*float64(len(vals))))]
	}
	type tile struct {
		x0, y0   int
		title    string
		v        []float32
		lo, hi   float64
		inverse  bool // colour by 1/v (depth)
		unit     string
		validity func(float32) bool
	}
	pos := func(v float32) bool { return v > 0 && v-v == 0 }
	fin := func(v float32) bool { return v-v == 0 }
	depthTile := tile{x0: w, y0: 0, title: "depth (m)", v: m.Depth, inverse: true, unit: "m", validity: pos}
	if rel {
		depthTile = tile{x0: w, y0: 0, title: "relative inverse depth", v: m.Depth, validity: fin}
	}
	depthTile.lo, depthTile.hi = pct(depthTile.v, depthTile.validity, 0.02), pct(depthTile.v, depthTile.validity, 0.98)
	scaleTitle, scaleUnit := "aleatoric: Laplace b (m)", "m"
	if rel {
		scaleTitle, scaleUnit = "aleatoric: relative b (b/depth)", ""
	}
	tiles := []tile{depthTile,
		{x0: 0, y0: h + legendH, title: scaleTitle, v: m.Scale, lo: 0, hi: pct(m.Scale, fin, 0.98), unit: scaleUnit, validity: fin},
		{x0: w, y0: h + legendH, title: "epistemic: DIDO K/S", v: m.Epistemic, lo: 0, hi: 1, validity: fin}}
	for _, t := range tiles {
		norm := func(v float64) float64 {
			if t.inverse {
				return (1/v - 1/t.hi) / (1/t.lo - 1/t.hi)
			}
			return (v - t.lo) / (t.hi - t.lo)
		}
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				v := t.v[y*w+x]
				c := color.RGBA{0, 0, 0, 255}
				if t.validity(v) && t.hi > t.lo {
					c = colormap(norm(float64(v)))
				}
				img.SetRGBA(t.x0+x, t.y0+y, c)
			}
		}
		// Legend: the bar from lo to hi, its end values, the title.
		label(img, t.x0+max(4, w/2-7*len(t.title)/2), t.y0+h+13, t.title)
		barX0, barX1, barY := t.x0+4, t.x0+w-4, t.y0+h+17
		for x := barX0; x < barX1; x++ {
			f := float64(x-barX0) / float64(max(barX1-barX0-1, 1))
			v := t.lo + f*(t.hi-t.lo)
			if t.inverse { // the bar runs from far (dark) to near (bright)
				v = 1 / (1/t.hi + f*(1/t.lo-1/t.hi))
			}
			c := colormap(norm(v))
			for y := barY; y < barY+8; y++ {
				img.SetRGBA(x, y, c)
			}
		}
		left, right := t.lo, t.hi
		if t.inverse {
			left, right = t.hi, t.lo
		}
		label(img, barX0, t.y0+h+legendH-3, strings.TrimSpace(fmt.Sprintf("%.3g %s", left, t.unit)))
		r := strings.TrimSpace(fmt.Sprintf("%.3g %s", right, t.unit))
		label(img, barX1-7*len(r), t.y0+h+legendH-3, r)
	}
	return writePNG(path, img)
}

// label draws text in black with the 7x13 bitmap font, baseline at y.
func label(img *image.RGBA, x, y int, s string) {
	d := &font.Drawer{Dst: img, Src: image.NewUniform(color.RGBA{0, 0, 0, 255}), Face: basicfont.Face7x13,
		Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// Write prints one line per image (depth and scale medians, K/S mean and
// 95th percentile) and what was written to out.
func (s *ImageRunSummary) Write(w io.Writer, out string) {
	kind := "metric"
	if s.Relative {
		kind = "relative (depth: relative inverse depth; scale: b/depth)"
	}
	fmt.Fprintf(w, "%d images through %s (input %s %s, %s, depth output %q read as %s: %s) and %s on %s\n", len(s.Images), s.DepthModel, s.Input, s.InputType, s.Resize,
		s.DepthOutput, s.Meaning, kind, s.AuxUEModel, s.Provider)
	if s.Intrinsics != nil {
		fmt.Fprintf(w, "camera intrinsics %s; scaled to each image: fx' = fx W/W_calib, cx' = (cx + 0.5) W/W_calib - 0.5 (likewise y)\n", s.Intrinsics)
		for _, is := range s.Images {
			if is.Intrinsics != nil {
				fmt.Fprintf(w, "  %-28s %s", filepath.Base(is.Image), is.Intrinsics)
				if is.FocalFactor > 0 {
					fmt.Fprintf(w, "  canonical-camera depth x %.6g", is.FocalFactor)
				}
				fmt.Fprintln(w)
			}
		}
	} else {
		fmt.Fprintln(w, "camera intrinsics: none given (--intrinsics fx,fy,cx,cy[,width,height] or --intrinsics-file)")
	}
	fmt.Fprintf(w, "%-28s %-11s %10s %10s %10s %10s\n", "image", "size", "depth p50", "b p50", "K/S mean", "K/S p95")
	for _, is := range s.Images {
		fmt.Fprintf(w, "%-28s %-11s %10.4g %10.4g %10.4g %10.4g\n", filepath.Base(is.Image), is.Size, is.Depth.P50, is.Scale.P50, is.Epistemic.Mean, is.Epistemic.P95)
	}
	fmt.Fprintf(w, "wrote %s (maps: <image>_depth.png, _scale.png, _epistemic.png 16-bit; _panel.png; summary.json)\n", out)
}
