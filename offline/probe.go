package offline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/didoedge/didoedge/camera/intrinsics"
	"github.com/didoedge/didoedge/offline/depthtrain"
	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// ProbeConfig configures Probe (`didoedge model inspect --probe`).
type ProbeConfig struct {
	Model string
	// Spec is the model's IO spec file; "" guesses the input from the
	// model (ProbeReport.Guessed) and reads the finest map output raw.
	Spec string
	// Image is a PNG or JPEG to run on; "" renders a frame of the
	// simulated outdoor world (camera/sim) whose depth is known.
	Image   string
	SimSeed int64
	// Width and Height size a guessed input whose sides are dynamic
	// (0: 640x192).
	Width, Height int
	Intrinsics    *intrinsics.Intrinsics
	Inference     onnxrt.Config
	Log           *slog.Logger
}

// ProbeReport is what the probe measured and what it proposes.
type ProbeReport struct {
	Model, Source string
	// Guessed is set when no spec was given: the input line was guessed.
	Guessed   bool
	InputLine string
	InputType string
	// Output is the depth output read, its map size and the input's.
	Output              string
	OutW, OutH          int
	InW, InH            int
	FrameW, FrameH      int
	Min, Max, P05, P50  float64
	P95                 float64
	NegativeFraction    float64
	NonFinite           int
	Bands               []float64 // median of the raw values per horizontal band, bottom first
	RowCorrelation      float64   // Spearman: raw value vs height above the bottom row
	DepthCorrelation    float64   // Spearman: raw value vs the true depth (NaN without it)
	KnownDepth          bool
	FartherIsLarger     bool // the evidence: true depth when known, else the rows
	Proposal            []string
	Declared            string // the spec's depth line ("" without a spec)
	DeclaredFartherMore bool   // what the declaration implies of the raw values
	Mismatch            string // why the declaration contradicts the evidence ("" when it agrees)
	// ReadRatio is the median of read-out / true depth over pixels with
	// a true depth, for a metric declaration on a known-depth frame (NaN
	// otherwise): 1 when the metres are right.
	ReadRatio    float64
	InvalidReads int // pixels the declared read-out marks as no depth
}

// ErrProbeMismatch marks a declaration that the probe contradicts.
var ErrProbeMismatch = errors.New("the spec's depth declaration contradicts the model's output")

// Probe runs a depth model on one frame and describes its raw output:
// resolution, range, sign, how it changes from the bottom of the image to
// the top and, on a simulated frame, with the true depth; it proposes the
// spec lines and checks a given spec's declaration against the evidence
// (ErrProbeMismatch, with the report filled).
func Probe(ctx context.Context, cfg ProbeConfig) (*ProbeReport, error) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rep := &ProbeReport{Model: cfg.Model, DepthCorrelation: math.NaN(), ReadRatio: math.NaN()}
	var declared infer.IOSpec
	haveSpec := cfg.Spec != ""
	if haveSpec {
		s, err := ReadSpec(cfg.Spec, infer.KindDepth)
		if err != nil {
			return nil, err
		}
		declared = s
	} else {
		s, err := guessSpec(cfg)
		if err != nil {
			return nil, err
		}
		declared, rep.Guessed = s, true
	}
	rep.InputLine = inputLine(declared.Input)
	// The raw view: the declared spec read as relative with scale 1, r = v.
	raw := declared
	raw.Depth = infer.OutputSpec{Name: declared.Depth.Name, Meaning: infer.MeaningRelative}
	models, err := infer.OpenModels(ctx, infer.ModelsConfig{Depth: cfg.Model, DepthSpec: raw, Inference: cfg.Inference, DepthSpecFile: cfg.Spec}, log)
	if err != nil {
		return nil, err
	}
	defer models.Close()
	ds := models.DepthSession()
	rep.Output, rep.InputType = ds.Spec().Depth.Name, ds.InputType(0)
	rep.OutW, rep.OutH = ds.MapSize(0)
	rep.InW, rep.InH = models.InputSize()

	var rgb []uint8
	var truth []float32
	var w, h int
	if cfg.Image != "" {
		if rgb, w, h, err = ReadImageRGB8(cfg.Image); err != nil {
			return nil, err
		}
		rep.Source = cfg.Image
	} else {
		// A frame of the simulated road at the input's size (at least
		// 64x32: the world needs some pixels), its depth known.
		w, h = max(rep.InW, 64), max(rep.InH, 32)
		src, err := depthtrain.NewSimSource(cfg.SimSeed, 1, 1, w, h)
		if err != nil {
			return nil, err
		}
		f, err := src.Render(0, 0)
		if err != nil {
			return nil, err
		}
		rgb, truth = f.RGB, f.Depth
		rep.Source, rep.KnownDepth = fmt.Sprintf("simulated outdoor frame %dx%d (seed %d), depth known", w, h, cfg.SimSeed), true
	}
	rep.FrameW, rep.FrameH = w, h
	dp, err := models.RunDepth(ctx, rgb, w, h)
	if err != nil {
		return nil, fmt.Errorf("probe %q: %w", cfg.Model, err)
	}
	v := append([]float32(nil), dp.Frame...)
	rep.describe(v, w, h, truth)
	rep.propose()
	if !haveSpec {
		return rep, nil
	}
	rep.Declared = depthLine(declared.Depth)
	rep.DeclaredFartherMore = fartherIsLarger(declared.Depth)
	if rep.DeclaredFartherMore != rep.FartherIsLarger {
		// With the true depth the evidence starts with the values'
		// direction ("larger where the true depth is larger"); on an
		// image without it, with the rows' ("values grow toward ...").
		lead := "they are"
		if math.IsNaN(rep.DepthCorrelation) {
			lead = "in this image"
		}
		rep.Mismatch = fmt.Sprintf("the spec (%s) reads larger raw values as %s, but %s %s",
			rep.Declared, map[bool]string{true: "farther", false: "nearer"}[rep.DeclaredFartherMore], lead, rep.evidence())
	}
	// The declared read-out on the same frame.
	if err := rep.readDeclared(ctx, cfg, declared, rgb, w, h, truth, log); err != nil {
		return nil, err
	}
	if rep.Mismatch != "" {
		return rep, fmt.Errorf("%w: %s", ErrProbeMismatch, rep.Mismatch)
	}
	return rep, nil
}

// readDeclared runs the declared read-out and measures its invalid pixels
// and, for metres on a known-depth frame, its ratio to the truth.
func (rep *ProbeReport) readDeclared(ctx context.Context, cfg ProbeConfig, spec infer.IOSpec, rgb []uint8, w, h int, truth []float32, log *slog.Logger) error {
	if spec.Depth.NeedsFocal() && cfg.Intrinsics == nil {
		return nil // the direction check stands; the metres need the camera
	}
	m, err := infer.OpenModels(ctx, infer.ModelsConfig{Depth: cfg.Model, DepthSpec: spec, Inference: cfg.Inference, DepthSpecFile: cfg.Spec}, log)
	if err != nil {
		return err
	}
	defer m.Close()
	if in := cfg.Intrinsics; in != nil {
		if err := m.SetFocal(in.Fx, in.Width); err != nil {
			return err
		}
	}
	dp, err := m.RunDepth(ctx, rgb, w, h)
	if err != nil {
		return fmt.Errorf("probe %q with its spec: %w", cfg.Model, err)
	}
	var ratios []float64
	for i, d := range dp.Frame {
		if !m.Relative() && !(d > 0) {
			rep.InvalidReads++
			continue
		}
		if truth != nil && truth[i] > 0 && !m.Relative() {
			ratios = append(ratios, float64(d)/float64(truth[i]))
		}
	}
	if len(ratios) > 0 {
		slices.Sort(ratios)
		rep.ReadRatio = ratios[len(ratios)/2]
	}
	if rep.Mismatch == "" && !m.Relative() && rep.InvalidReads > len(dp.Frame)/2 {
		rep.Mismatch = fmt.Sprintf("the spec (%s) reads %d of %d pixels as no depth (zero or negative metres): the sign or the meaning is wrong",
			rep.Declared, rep.InvalidReads, len(dp.Frame))
	}
	return nil
}

// describe measures the raw values v of a w x h frame.
func (rep *ProbeReport) describe(v []float32, w, h int, truth []float32) {
	var vals, rows, vs, ds []float64
	neg := 0
	for i, x := range v {
		if x-x != 0 {
			rep.NonFinite++
			continue
		}
		f := float64(x)
		vals = append(vals, f)
		rows = append(rows, float64(h-1-i/w)) // height above the bottom row
		if f < 0 {
			neg++
		}
		if truth != nil && truth[i] > 0 {
			vs, ds = append(vs, f), append(ds, float64(truth[i]))
		}
	}
	if len(vals) == 0 {
		return
	}
	rep.NegativeFraction = float64(neg) / float64(len(vals))
	rep.RowCorrelation = spearman(vals, rows)
	if len(vs) > 10 {
		rep.DepthCorrelation = spearman(vs, ds)
	}
	sorted := slices.Clone(vals)
	slices.Sort(sorted)
	q := func(p float64) float64 { return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))] }
	rep.Min, rep.Max, rep.P05, rep.P50, rep.P95 = sorted[0], sorted[len(sorted)-1], q(0.05), q(0.5), q(0.95)
	const bands = 6
	for b := range bands {
		var band []float64
		for y := h - 1 - b*h/bands; y > h-1-(b+1)*h/bands && y >= 0; y-- {
			for x := range w {
				if f := v[y*w+x]; f-f == 0 {
					band = append(band, float64(f))
				}
			}
		}
		if len(band) == 0 {
			rep.Bands = append(rep.Bands, math.NaN())
			continue
		}
		slices.Sort(band)
		rep.Bands = append(rep.Bands, band[len(band)/2])
	}
	if !math.IsNaN(rep.DepthCorrelation) {
		rep.FartherIsLarger = rep.DepthCorrelation > 0
	} else {
		rep.FartherIsLarger = rep.RowCorrelation > 0
	}
}

// evidence says what the values do, in words: toward the top of the
// image and, on a known-depth frame, against the true depth (which
// decides).
func (rep *ProbeReport) evidence() string {
	grow, rowDir := "shrink", "smaller"
	if rep.RowCorrelation > 0 {
		grow, rowDir = "grow", "larger"
	}
	rows := fmt.Sprintf("values %s toward the top of the image (rank correlation with the height %.2f): farther is %s", grow, rep.RowCorrelation, rowDir)
	if math.IsNaN(rep.DepthCorrelation) {
		return rows
	}
	dir := "smaller"
	if rep.FartherIsLarger {
		dir = "larger"
	}
	return fmt.Sprintf("%s where the true depth is larger (rank correlation %.2f); %s", dir, rep.DepthCorrelation, rows)
}

// propose writes the spec lines that fit the evidence.
func (rep *ProbeReport) propose() {
	name := rep.Output
	line := func(rest string) string { return fmt.Sprintf("depth: {name: %s, %s}", name, rest) }
	allNeg, allPos := rep.Max < 0, rep.Min > 0
	switch {
	case rep.FartherIsLarger && allNeg:
		rep.Proposal = []string{"farther is larger and every value is negative: negative disparity (PyDNet-like).",
			line("meaning: relative, scale: -1") + "   # relative inverse depth, larger = nearer after the sign",
			line("meaning: disparity, scale: -F") + "   # metres when F = focal x baseline (x the image width for disparities normalized by it)"}
	case rep.FartherIsLarger && allPos:
		rep.Proposal = []string{fmt.Sprintf("farther is larger and every value is positive (median %.4g): depth.", rep.P50),
			line("meaning: metric_depth") + "   # when the values are metres (scale: k when they are k x metres, e.g. 0.001 for millimetres)",
			line("meaning: metric_depth, canonical_focal: 1000") + "   # Metric3D: metres of a canonical camera; give the camera's intrinsics"}
	case rep.FartherIsLarger:
		rep.Proposal = []string{"farther is larger, values of both signs: a depth-like output with an offset.",
			line("meaning: metric_depth, shift: S") + "   # when depth = value + S metres",
			line("meaning: relative, scale: -1") + "   # relative: larger = nearer after the sign"}
	case allPos && rep.Max <= 1:
		rep.Proposal = []string{"nearer is larger, values in (0, 1]: a sigmoid disparity (monodepth2, Lite-Mono) or normalized inverse depth.",
			line("meaning: sigmoid_disparity, min_depth: 0.1, max_depth: 100") + "   # monodepth2 (add scale: 5.4 for its stereo models)",
			line("meaning: relative") + "   # scale-ambiguous models (monocular training): aligned per frame"}
	default:
		rep.Proposal = []string{"nearer is larger: inverse depth or disparity.",
			line("meaning: relative") + "   # MiDaS, DPT, Depth Anything (relative): affine-invariant inverse depth",
			line("meaning: disparity, scale: F") + "   # stereo disparity in pixels: metres = F / value, F = focal x baseline"}
	}
	if rep.OutW != rep.InW || rep.OutH != rep.InH {
		rep.Proposal = append(rep.Proposal, fmt.Sprintf("the output is %dx%d for a %dx%d input (1/%.3g): it is upsampled to the frame; a multi-scale model reads its finest output when depth.name is left out",
			rep.OutW, rep.OutH, rep.InW, rep.InH, float64(rep.InW)/float64(rep.OutW)))
	}
}

// fartherIsLarger is what a declaration says of raw values: does a larger
// raw value mean a larger depth?
func fartherIsLarger(o infer.OutputSpec) bool {
	r := o.Readout(1)
	switch {
	case r.Relative:
		return r.A < 0 // r = A v is larger = nearer
	case r.Inverse:
		return r.A < 0 // d = A/(v+B) decreases in v when A > 0
	}
	return r.A > 0
}

// spearman is the rank correlation of a and b (average ranks for ties).
func spearman(a, b []float64) float64 {
	ra, rb := ranks(a), ranks(b)
	n := float64(len(a))
	var ma, mb float64
	for i := range ra {
		ma, mb = ma+ra[i], mb+rb[i]
	}
	ma, mb = ma/n, mb/n
	var sab, saa, sbb float64
	for i := range ra {
		da, db := ra[i]-ma, rb[i]-mb
		sab, saa, sbb = sab+da*db, saa+da*da, sbb+db*db
	}
	if saa == 0 || sbb == 0 {
		return 0
	}
	return sab / math.Sqrt(saa*sbb)
}

func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(i, j int) int {
		switch {
		case v[i] < v[j]:
			return -1
		case v[i] > v[j]:
			return 1
		}
		return 0
	})
	r := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
			j++
		}
		for k := i; k <= j; k++ {
			r[idx[k]] = float64(i+j) / 2
		}
		i = j + 1
	}
	return r
}

// guessSpec guesses a spec from the model's first input (layout by the
// axis of 3 channels, sides from fixed dimensions or the configured size,
// pixel range 255 for uint8) and leaves the depth output to the finest map.
func guessSpec(cfg ProbeConfig) (infer.IOSpec, error) {
	s, err := onnx.Inspect(cfg.Model)
	if err != nil {
		return infer.IOSpec{}, err
	}
	if len(s.Inputs) == 0 {
		return infer.IOSpec{}, fmt.Errorf("probe %q: the model has no input", cfg.Model)
	}
	in := s.Inputs[0]
	dims := strings.Split(strings.Trim(in.Shape, "()"), ",")
	if len(dims) != 4 {
		return infer.IOSpec{}, fmt.Errorf("probe %q: input %q has shape %s, not an image (N,C,H,W) or (N,H,W,C); write its spec and pass --spec", cfg.Model, in.Name, in.Shape)
	}
	num := func(d string) int {
		n, err := strconv.Atoi(strings.TrimSpace(d))
		if err != nil {
			return 0
		}
		return n
	}
	spec := infer.IOSpec{Input: infer.InputSpec{Name: in.Name, Layout: infer.LayoutNCHW}, Depth: infer.OutputSpec{Meaning: infer.MeaningRelative}}
	hIdx, wIdx := 2, 3
	switch {
	case num(dims[1]) == 3 || num(dims[1]) == 1:
		spec.Input.Channels = num(dims[1])
	case num(dims[3]) == 3 || num(dims[3]) == 1:
		spec.Input.Layout, spec.Input.Channels, hIdx, wIdx = infer.LayoutNHWC, num(dims[3]), 1, 2
	default:
		return infer.IOSpec{}, fmt.Errorf("probe %q: input %q has shape %s: no axis of 3 (or 1) channels; write its spec and pass --spec", cfg.Model, in.Name, in.Shape)
	}
	spec.Input.Height, spec.Input.Width = num(dims[hIdx]), num(dims[wIdx])
	if spec.Input.Height <= 0 || spec.Input.Width <= 0 {
		spec.Input.Height, spec.Input.Width = 192, 640
		if cfg.Width > 0 && cfg.Height > 0 {
			spec.Input.Height, spec.Input.Width = cfg.Height, cfg.Width
		}
	}
	if in.Type == "uint8" {
		spec.Input.PixelRange = 255
	}
	return spec, spec.Validate()
}

// inputLine writes an input section on one line.
func inputLine(in infer.InputSpec) string {
	parts := []string{"name: " + in.Name}
	if in.Layout != "" && in.Layout != infer.LayoutNCHW {
		parts = append(parts, "layout: "+in.Layout)
	}
	parts = append(parts, fmt.Sprintf("height: %d", in.Height), fmt.Sprintf("width: %d", in.Width))
	if in.PixelRange == 255 {
		parts = append(parts, "pixel_range: 255")
	}
	return "input: {" + strings.Join(parts, ", ") + "}"
}

// depthLine writes a depth section on one line.
func depthLine(o infer.OutputSpec) string {
	parts := []string{}
	if o.Name != "" {
		parts = append(parts, "name: "+o.Name)
	}
	parts = append(parts, "meaning: "+o.Meaning)
	for _, kv := range []struct {
		k string
		v float32
	}{{"scale", o.Scale}, {"shift", o.Shift}, {"min_depth", o.MinDepth}, {"max_depth", o.MaxDepth}, {"canonical_focal", o.CanonicalFocal}} {
		if kv.v != 0 {
			parts = append(parts, fmt.Sprintf("%s: %g", kv.k, kv.v))
		}
	}
	return "depth: {" + strings.Join(parts, ", ") + "}"
}

// Write prints the report.
func (rep *ProbeReport) Write(w io.Writer) {
	fmt.Fprintf(w, "model:      %s\nframe:      %s\n", rep.Model, rep.Source)
	guess := ""
	if rep.Guessed {
		guess = "   # guessed from the model: check pixel_range, mean, std, color"
	}
	fmt.Fprintf(w, "input:      %s (%s)%s\n", rep.InputLine, rep.InputType, guess)
	fmt.Fprintf(w, "output:     %s, %dx%d for a %dx%d input\n", rep.Output, rep.OutW, rep.OutH, rep.InW, rep.InH)
	sign := "mixed signs"
	switch {
	case rep.Max < 0:
		sign = "all negative"
	case rep.Min > 0:
		sign = "all positive"
	}
	fmt.Fprintf(w, "range:      %.4g .. %.4g (p05 %.4g, p50 %.4g, p95 %.4g), %s (%.1f%% negative), %d non-finite\n",
		rep.Min, rep.Max, rep.P05, rep.P50, rep.P95, sign, 100*rep.NegativeFraction, rep.NonFinite)
	fmt.Fprintf(w, "bottom->top: medians per sixth of the image:")
	for _, b := range rep.Bands {
		fmt.Fprintf(w, " %.4g", b)
	}
	fmt.Fprintf(w, " (rank correlation with the height %.2f)\n", rep.RowCorrelation)
	if !math.IsNaN(rep.DepthCorrelation) {
		fmt.Fprintf(w, "true depth: rank correlation %.2f\n", rep.DepthCorrelation)
	}
	fmt.Fprintf(w, "evidence:   %s\n", rep.evidence())
	fmt.Fprintln(w, "proposed spec lines:")
	fmt.Fprintf(w, "  %s\n", rep.InputLine)
	for _, p := range rep.Proposal {
		fmt.Fprintf(w, "  %s\n", p)
	}
	if rep.Declared == "" {
		return
	}
	fmt.Fprintf(w, "declared:   %s\n", rep.Declared)
	if !math.IsNaN(rep.ReadRatio) {
		fmt.Fprintf(w, "read-out:   median read / true depth %.3g; %d pixels read as no depth\n", rep.ReadRatio, rep.InvalidReads)
	}
	if rep.Mismatch != "" {
		fmt.Fprintf(w, "MISMATCH:   %s\n", rep.Mismatch)
	} else {
		fmt.Fprintln(w, "declaration agrees with the evidence")
	}
}
