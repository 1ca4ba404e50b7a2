package infer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/didoedge/didoedge/internal/lograte"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// AuxUE input sources of a features-input AuxUE (ModelsConfig.AuxInputs)
// besides depth-model feature output names.
const (
	SourceImage = "image" // the depth model's input tensor (NCHW)
	SourceDepth = "depth" // the depth read-out at the depth output's grid, times DepthScale
)

// ModelsConfig names the depth model, the AuxUE and their IO specs.
type ModelsConfig struct {
	Depth     string // depth model file
	DepthSpec IOSpec
	// AuxUE is the AuxUE model file; "" opens the depth model alone
	// (RunDepth only).
	AuxUE     string
	AuxUESpec IOSpec
	// AuxInputs lists, for an AuxUE without depth_input, what is
	// concatenated channel after channel into its features input:
	// SourceImage, SourceDepth or the name of a depth-model feature output.
	AuxInputs []string
	// DepthScale multiplies the SourceDepth channel (0 means 1).
	DepthScale float32
	Inference  onnxrt.Config
	// BatchSize is the most frames one run of each model takes (the
	// pipeline's batch_size); 0 or 1 = one frame per run. Above 1 both
	// models need a dynamic batch dimension.
	BatchSize int
	// BatchIfDynamic opens fixed-batch models with batch 1 instead of
	// refusing BatchSize > 1 (a default batch size, not a user's).
	BatchIfDynamic bool
	// DepthSpecFile and AuxUESpecFile name where the specs come from, for
	// messages ("" = given inline).
	DepthSpecFile, AuxUESpecFile string
	// DepthTensors are intermediate tensors of the depth model to expose
	// as extra outputs (DepthPass.Tensors: an AuxUE trainer reads them).
	// The AuxUE's model_features tensor is exposed without being listed.
	DepthTensors []string
}

func specSource(file string) string {
	if file == "" {
		return "io spec given inline"
	}
	return fmt.Sprintf("io spec %q", file)
}

// Maps are one frame's read-outs at the frame's size. They alias buffers
// that the next call overwrites.
type Maps struct {
	Width, Height int
	// Depth is in metres; for a relative model it is the relative inverse
	// depth the model outputs (larger is nearer, no unit).
	Depth []float32
	// Scale is the Laplace b: metres, or for a relative model b/depth.
	Scale []float32
	// Epistemic is DIDO's K/S in (0, 1].
	Epistemic []float32
	Relative  bool
	// Native are the same maps on the grids they were computed on, before
	// the resampling to the frame; the maps above are Native resampled.
	Native NativeMaps
}

// NativeMaps are a frame's maps at the resolution the models computed
// them: the depth read-out on the depth model's output grid, the Laplace
// scale and K/S on the AuxUE's. Geometry places the frame in the input;
// mapgrid.NewRemap(Geometry, w, h) resamples a map to the frame exactly as
// Maps' frame-size maps were made. The slices alias buffers that the next
// inference overwrites.
type NativeMaps struct {
	Geometry         Geometry
	DepthW, DepthH   int
	Depth            []float32
	AuxW, AuxH       int
	Scale, Epistemic []float32
	// Features is the depth model's tensor that the AuxUE reads
	// (model_features), FeatureC x FeatureH x FeatureW, on host sessions;
	// nil when the AuxUE reads none or it stays on the device.
	Features                     []float32
	FeatureC, FeatureH, FeatureW int
}

// DepthPass is the depth model's part of a frame, as an AuxUE trainer
// needs it. The slices alias buffers that the next call overwrites.
type DepthPass struct {
	Geometry Geometry
	// Image is the depth model's input tensor (its layout and scaling).
	Image []float32
	// Depth is the depth read-out (metres, or relative inverse depth) on
	// the input grid (InW x InH): the AuxUE's depth input.
	Depth []float32
	// Frame is the same read-out at the frame's size.
	Frame    []float32
	Relative bool
	// Tensors are the depth model's exposed tensors of
	// ModelsConfig.DepthTensors, in that order (batch 1, NCHW as the
	// model computes them).
	Tensors [][]float32
}

// StageTimes are the durations of one Infer call. Depth and AuxUE are
// ONNX Runtime's execution of each model alone; Readout is everything
// else after the staging copy (Preprocess): the scans of the outputs for
// NaN and Inf, the depth conversion and the AuxUE's inputs, the remaps.
//
// Copy is the time of the host/device copies of the device-resident path
// (inference.device_tensors, device.go): the image's upload, the depth
// map's and the AuxUE maps' download, and a depth read-out's upload when
// the AuxUE cannot read the raw output. It is 0 on the host path, where
// ONNX Runtime copies inside its runs (in Depth and AuxUE).
type StageTimes struct {
	Preprocess, Depth, AuxUE, Readout, Copy time.Duration
}

// ErrInvalidOutput marks a frame whose model outputs held NaN or Inf.
var ErrInvalidOutput = errors.New("model output holds NaN or Inf")

// Models are the depth model and the AuxUE with every buffer between them
// allocated once: an RGB8 frame of any size in, depth, Laplace scale and
// K/S maps at the frame's size out. run, calibrate, eval-quick, train auxue
// and model run all go through it. Not safe for concurrent use.
type Models struct {
	cfg        ModelsConfig
	depth, aux *Session
	rl         *lograte.Limiter // NaN/Inf frames, shared by the views
	shared     bool             // a Share view: Close leaves the sessions open
	relative   bool
	inW, inH   int
	outW, outH int // depth output map
	depthOut   []float32
	resDepth   []float32 // the last batch's read-out depth: depthOut or the AuxUE's depth input slot
	depthIn    []float32 // depth on the input grid (aliases depthOut when the sizes agree)
	toInput    *Remap    // depth output -> input grid; nil when the sizes agree
	auxCopies  []auxCopy // features-input AuxUE
	auxW, auxH int       // AuxUE map size
	// tensorOut are the depth-model outputs of cfg.DepthTensors; featOut
	// is the output feeding the AuxUE's model_features input (-1: none).
	tensorOut []int
	tensors   [][]float32 // their batch-1 slots
	featOut   int
	dev       *modelsDev // the device path, shared by the views

	// The camera's focal length fx, in pixels of frames calibW wide (0 =
	// the frames' own width); 0 = not given. A camera-dependent depth
	// output (canonical_focal) reads through it.
	fx      float64
	calibW  int
	readout Readout // the depth read-out at the current frame size

	// per frame size
	geo                                  Geometry
	haveGeo                              bool
	resizer                              *Resizer
	canvas                               []uint8
	depthRemap, auxRemap                 *Remap
	frameDepth, frameScale, frameEpistem []float32
	one                                  [1]*Models // InferTimed's batch of one, without allocating

	// the last InferBatch's result of this view
	res    Maps
	resImg []uint8
	resErr error
}

// auxCopy is one block of a features input: values [off, off+n) of the
// AuxUE input come from src (times scale): the depth model's input
// (auxSrcImage), the view's depth (auxSrcDepth) or depth output i >= 0.
type auxCopy struct {
	off, n int
	src    int
	scale  float32
}

const (
	auxSrcImage = -1
	auxSrcDepth = -2
)

// Staged is one frame fitted into the depth model's input and normalized
// ahead of its run (Models.Stage), so that this work can overlap the
// models' runs on another goroutine. Each camera keeps its own.
type Staged struct {
	geo     Geometry
	have    bool
	resizer *Resizer
	input   []float32 // the depth model's image input, one frame
	image   []uint8   // the input-size RGB8 image the model sees
	// direct: the normalized frame is in the depth session's input slot
	// 0, not in input (StageDirect).
	direct bool
}

// Direct reports whether st was staged by StageDirect.
func (st *Staged) Direct() bool { return st.direct }

// Image is the input-size RGB8 image of the staged frame (InW x InH).
func (st *Staged) Image() []uint8 { return st.image }

// Geometry is how the staged frame sits in the input.
func (st *Staged) Geometry() Geometry { return st.geo }

// NewStaged allocates the buffers of one staged frame.
func (m *Models) NewStaged() *Staged {
	return &Staged{input: make([]float32, len(m.depth.Input())), image: make([]uint8, 3*m.inW*m.inH)}
}

// Stage fits an interleaved RGB8 frame of any size into the input and
// normalizes it into st. It reads only the models' description and st,
// never the sessions' tensors, so it may run on another goroutine while
// the models run (one goroutine per st). It allocates only when the frame
// size changes.
func (m *Models) Stage(st *Staged, rgb []uint8, w, h int) error {
	st.direct = false
	return m.stage(st, st.input, rgb, w, h)
}

// StageDirect stages a frame as Stage does, but normalizes it straight
// into the depth session's input slot 0 (which the AuxUE's image input
// shares), so that InferBatch of this frame alone copies nothing: a
// 640x192 frame is 1.5 MB that the copy would move on the frame's path.
// The caller guarantees that no InferBatch runs on these sessions from
// the start of StageDirect until the batch of this frame, and that no
// other frame is staged directly before then: one camera, whose
// scheduler is idle (runtime's single-camera pipeline).
func (m *Models) StageDirect(st *Staged, rgb []uint8, w, h int) error {
	st.direct = true
	return m.stage(st, m.depth.InputSlot(0, 0), rgb, w, h)
}

// stage fits rgb into st's geometry and image and normalizes it into dst.
func (m *Models) stage(st *Staged, dst []float32, rgb []uint8, w, h int) error {
	if w <= 0 || h <= 0 || len(rgb) < 3*w*h {
		return fmt.Errorf("preprocess: frame of %d bytes is not a %dx%d RGB image", len(rgb), w, h)
	}
	if !st.have || st.geo.FrameW != w || st.geo.FrameH != h {
		st.geo, st.have = m.Geometry(w, h), true
		st.resizer = NewResizer(st.geo.CW, st.geo.CH)
		clear(st.image) // black borders
	}
	img, err := st.resizer.Resize(rgb, w, h)
	if err != nil {
		return fmt.Errorf("preprocess: %w", err)
	}
	g := st.geo
	if g.CW != m.inW || g.CH != m.inH {
		for y := 0; y < g.CH; y++ {
			copy(st.image[3*((g.Y0+y)*m.inW+g.X0):], img[3*y*g.CW:3*(y+1)*g.CW])
		}
	} else {
		copy(st.image, img) // img may be the caller's frame
	}
	if err := m.depth.ImageInto(dst, st.image, m.inW, m.inH, 3*m.inW); err != nil {
		return fmt.Errorf("preprocess: %w", err)
	}
	return nil
}

// MaxBatch is the most frames one InferBatch takes.
func (m *Models) MaxBatch() int {
	if m.aux == nil {
		return m.depth.MaxBatch()
	}
	return min(m.depth.MaxBatch(), m.aux.MaxBatch())
}

// InferBatch runs the frames staged for views (staged[k] for views[k]) as
// one batch through the shared sessions: the depth model once for all,
// then the AuxUE once for all. views are m and views of it (Share), each
// at most once, at most MaxBatch of them. Frame k's maps are then
// views[k].Result(). An error fails every frame of the batch (a session
// that cannot run); a frame whose outputs hold NaN or Inf fails alone.
// It allocates nothing once each view's frame size is known.
func (m *Models) InferBatch(ctx context.Context, views []*Models, staged []*Staged, t *StageTimes) error {
	n := len(views)
	if m.aux == nil {
		return errors.New("infer: the models were opened without an AuxUE")
	}
	if n < 1 || n > m.MaxBatch() || len(staged) != n {
		return fmt.Errorf("infer batch: %d views and %d staged frames, the sessions take 1 to %d", n, len(staged), m.MaxBatch())
	}
	t0 := time.Now()
	for k, v := range views {
		if v.depth != m.depth || v.aux != m.aux {
			return errors.New("infer batch: a view of other sessions")
		}
		st := staged[k]
		if !st.have {
			return errors.New("infer batch: a frame that was not staged")
		}
		v.setFrame(st.geo.FrameW, st.geo.FrameH)
		switch {
		case !st.direct:
			copy(m.depth.InputSlot(0, k), st.input)
		case n > 1:
			return fmt.Errorf("infer batch: a frame staged directly into slot 0 in a batch of %d", n)
		}
		v.resImg = st.image
	}
	t.Preprocess = time.Since(t0)
	return m.runSlots(ctx, views, t)
}

// Result is this view's frame of the last InferBatch: maps at the frame's
// size and the input-size image, valid until the next batch.
func (m *Models) Result() (Maps, []uint8, error) { return m.res, m.resImg, m.resErr }

// runSlots runs the depth model and the AuxUE on the filled depth input
// slots, one per view, and leaves each view's maps in its result.
func (m *Models) runSlots(ctx context.Context, views []*Models, t *StageTimes) error {
	n := len(views)
	t1 := time.Now()
	dev := m.deviceOn()
	fr, err := m.depth.RunBatch(ctx, n)
	if err != nil {
		return err
	}
	t2 := time.Now()
	// Depth and AuxUE are ONNX Runtime's execution alone; the output scans
	// (RunBatch's NaN/Inf count) belong to the read-outs, the device
	// path's copies to Copy.
	t.Depth, t.Copy = fr.Run, fr.Copy
	scans := t2.Sub(t1) - fr.Run - fr.Copy
	var slotCopies time.Duration
	for k, v := range views {
		v.res, v.resErr = Maps{}, nil
		if !fr.SlotValid[k] {
			v.resErr = m.nonFinite(m.depth, fr)
		}
		// The read-out depth goes straight into the AuxUE's depth input
		// when that input is the depth on the same grid (no conversion),
		// saving a copy of the map; it is this frame's Maps.Depth then.
		owns := m.cfg.AuxUESpec.OwnsInputs()
		v.resDepth = v.depthOut
		if !dev && owns && v.toInput == nil && len(m.aux.InputSlot(1, k)) == len(v.depthOut) {
			v.resDepth = m.aux.InputSlot(1, k)
		}
		if err := v.focalReady(); err != nil {
			return err
		}
		invalid, err := m.depth.DepthSlotReadout(k, v.resDepth, v.readout)
		if err != nil {
			return err
		}
		if v.toInput != nil {
			if err := v.toInput.Apply(v.depthOut, v.depthIn); err != nil {
				return err
			}
		}
		if dev {
			// The image and model_features are the depth model's device
			// tensors already; the AuxUE's depth input is its raw depth
			// output unless the read-out changed a value.
			switch {
			case !m.dev.depthShared:
				copy(m.aux.InputSlot(1, k), v.depthIn) // uploaded by the AuxUE's run
			case !v.readout.identity() || invalid > 0:
				d, err := m.depth.uploadOutputSlot(0, k, v.depthIn)
				if err != nil {
					return err
				}
				slotCopies += d
			}
			continue
		}
		if owns {
			if !m.aux.InputShared(0) {
				copy(m.aux.InputSlot(0, k), m.depth.InputSlot(0, k))
			}
			if &v.resDepth[0] != &m.aux.InputSlot(1, k)[0] {
				copy(m.aux.InputSlot(1, k), v.depthIn)
			}
			if m.featOut >= 0 {
				copy(m.aux.InputSlot(2, k), m.depth.OutputSlot(m.featOut, k))
			}
			continue
		}
		dst := m.aux.InputSlot(0, k)
		for _, c := range m.auxCopies {
			var src []float32
			switch c.src {
			case auxSrcImage:
				src = m.depth.InputSlot(0, k)
			case auxSrcDepth:
				src = v.depthOut
			default:
				src = m.depth.OutputSlot(c.src, k)
			}
			d := dst[c.off : c.off+c.n]
			if c.scale == 1 {
				copy(d, src)
				continue
			}
			for i, x := range src {
				d[i] = x * c.scale
			}
		}
	}
	t3 := time.Now()
	fa, err := m.aux.RunBatch(ctx, n)
	if err != nil {
		return err
	}
	t4 := time.Now()
	t.AuxUE = fa.Run
	t.Copy += fa.Copy + slotCopies
	scans += t4.Sub(t3) - fa.Run - fa.Copy - slotCopies
	for k, v := range views {
		if !fa.SlotValid[k] && v.resErr == nil {
			v.resErr = m.nonFinite(m.aux, fa)
		}
		if v.resErr != nil {
			continue
		}
		w, h := v.geo.FrameW, v.geo.FrameH
		maps := Maps{Width: w, Height: h, Depth: v.resDepth, Scale: m.aux.OutputSlot(0, k), Epistemic: m.aux.OutputSlot(1, k), Relative: m.relative}
		maps.Native = NativeMaps{Geometry: v.geo, DepthW: m.outW, DepthH: m.outH, Depth: maps.Depth,
			AuxW: m.auxW, AuxH: m.auxH, Scale: maps.Scale, Epistemic: maps.Epistemic}
		if f := m.cfg.AuxUESpec.ModelFeatures; f != nil && m.featOut >= 0 && !dev {
			maps.Native.Features = m.depth.OutputSlot(m.featOut, k)
			maps.Native.FeatureC, maps.Native.FeatureH, maps.Native.FeatureW = f.Channels, f.Height, f.Width
		}
		if !v.depthRemap.Identity() {
			if err := v.depthRemap.Apply(v.resDepth, v.frameDepth); err != nil {
				return err
			}
			maps.Depth = v.frameDepth
		}
		if !v.auxRemap.Identity() {
			if err := v.auxRemap.Apply(maps.Scale, v.frameScale); err != nil {
				return err
			}
			if err := v.auxRemap.Apply(maps.Epistemic, v.frameEpistem); err != nil {
				return err
			}
			maps.Scale, maps.Epistemic = v.frameScale, v.frameEpistem
		}
		v.res = maps
	}
	t.Readout = t3.Sub(t2) + scans + time.Since(t4)
	return nil
}

// OpenModels loads the models of cfg and checks that they fit together.
func OpenModels(ctx context.Context, cfg ModelsConfig, log *slog.Logger) (_ *Models, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.AuxUE != "" {
		if err := CheckPair(cfg.DepthSpec, cfg.AuxUESpec, cfg.AuxInputs); err != nil {
			return nil, fmt.Errorf("depth model %q (%s) and auxue model %q (%s) do not fit together: %w",
				cfg.Depth, specSource(cfg.DepthSpecFile), cfg.AuxUE, specSource(cfg.AuxUESpecFile), err)
		}
	} else if cfg.DepthSpec.IsAuxUE() {
		return nil, fmt.Errorf("depth model %q: its %s describes an AuxUE (kind: auxue)", cfg.Depth, specSource(cfg.DepthSpecFile))
	}
	// m is not the named result: "return nil, err" must not clear it before
	// the deferred Close runs.
	m := &Models{cfg: cfg, relative: cfg.DepthSpec.Relative(), rl: lograte.New(log, 0), featOut: -1}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	so := SessionOptions{MaxBatch: cfg.BatchSize, IfDynamic: cfg.BatchIfDynamic}
	// Tensors of the depth graph that the AuxUE (model_features) or the
	// caller read become extra outputs of an in-memory copy.
	dspec := cfg.DepthSpec
	expose := append([]string(nil), cfg.DepthTensors...)
	if f := cfg.AuxUESpec.ModelFeatures; cfg.AuxUE != "" && f != nil && !contains(expose, f.Tensor) {
		expose = append(expose, f.Tensor)
	}
	if len(expose) > 0 {
		dspec.Features = append([]FeatureSpec(nil), dspec.Features...)
		for _, t := range expose {
			if !contains(dspec.outputNames(), t) {
				dspec.Features = append(dspec.Features, FeatureSpec{Name: t})
			}
		}
		so.Expose = expose
	}
	if m.depth, err = OpenSession(ctx, cfg.Depth, dspec, cfg.Inference, so, log); err != nil {
		return nil, fmt.Errorf("depth model (%s): %w", specSource(cfg.DepthSpecFile), err)
	}
	so.Expose = nil
	outIndex := func(name string) int {
		for i, n := range m.depth.OutputNames() {
			if n == name {
				return i
			}
		}
		return -1
	}
	for _, t := range cfg.DepthTensors {
		i := outIndex(t)
		m.tensorOut, m.tensors = append(m.tensorOut, i), append(m.tensors, m.depth.Output(i))
	}
	if f := cfg.AuxUESpec.ModelFeatures; cfg.AuxUE != "" && f != nil {
		m.featOut = outIndex(f.Tensor)
		log.Info("the AuxUE reads a tensor of the depth model (exposed in memory)", "depth", cfg.Depth, "tensor", f.Tensor,
			"shape", fmt.Sprintf("(1,%d,%d,%d)", f.Channels, f.Height, f.Width))
	}
	if cfg.AuxUE != "" {
		aso := so
		aso.SkipAlpha = true
		if cfg.AuxUESpec.OwnsInputs() {
			// The AuxUE's image input holds the depth model's input
			// values (its contract): one buffer for both saves a copy of
			// the frame (1.5 MB at 640x192) on every run.
			aso.SharedInputs = []SharedInput{{Data: m.depth.inputs[0].GetData(), FrameSize: m.depth.inPer[0]}}
		}
		if m.aux, err = OpenSession(ctx, cfg.AuxUE, cfg.AuxUESpec, cfg.Inference, aso, log); err != nil {
			return nil, fmt.Errorf("auxue model (%s): %w", specSource(cfg.AuxUESpecFile), err)
		}
		if so.MaxBatch > 1 && m.depth.MaxBatch() != m.aux.MaxBatch() {
			// Only with BatchIfDynamic: one model batches, the other not.
			log.Warn("one run per frame: only one of the models has a dynamic batch dimension",
				"depth", cfg.Depth, "depth_batch", m.depth.MaxBatch(), "auxue", cfg.AuxUE, "auxue_batch", m.aux.MaxBatch())
		}
	}
	if err = m.wire(log); err != nil {
		return nil, err
	}
	m.setupDevice(log)
	return m, nil
}

// Share returns a view of the same sessions with its own buffers (frame
// size, resizer, read-out maps), so that several cameras run through one
// ONNX Runtime session per model without reallocating when their frame
// sizes differ. The views and m must be used from one goroutine at a time
// (a frame's runs and read-outs are not atomic across views); Close of a
// view releases nothing, Close of m releases the sessions of every view.
func (m *Models) Share() (*Models, error) {
	v := &Models{cfg: m.cfg, depth: m.depth, aux: m.aux, relative: m.relative, shared: true, rl: m.rl,
		tensorOut: m.tensorOut, tensors: make([][]float32, len(m.tensors)), featOut: m.featOut, dev: m.dev}
	// m's wire already warned about anything worth a warning.
	if err := v.wire(slog.New(slog.DiscardHandler)); err != nil {
		return nil, err
	}
	return v, nil
}

// CheckPair checks a depth model's spec and an AuxUE's spec against each
// other, without the models: an AuxUE that owns its inputs must read the
// depth model's image input as the depth model receives it (every key of
// input but name and resize equal) and its depth in the depth model's
// units; a features-input AuxUE must name known sources.
func CheckPair(depth, aux IOSpec, auxInputs []string) error {
	if depth.IsAuxUE() {
		return errors.New("the depth model's spec describes an AuxUE (kind: auxue)")
	}
	if !aux.IsAuxUE() {
		return errors.New("the AuxUE's spec describes a depth model; an AuxUE's spec has kind: auxue, scale and epistemic")
	}
	if !aux.OwnsInputs() {
		known := []string{SourceImage, SourceDepth}
		for _, f := range depth.Features {
			known = append(known, f.Name)
		}
		if len(auxInputs) == 0 {
			return fmt.Errorf("auxue.inputs: empty; a features-input AuxUE (no depth_input) needs its sources, from %s", strings.Join(known, ", "))
		}
		for i, in := range auxInputs {
			if !contains(known, in) {
				return fmt.Errorf("auxue.inputs[%d]: %q is not one of %s", i, in, strings.Join(known, ", "))
			}
			if in == SourceImage && depth.Layout() != LayoutNCHW {
				return fmt.Errorf("auxue.inputs[%d]: image: a features input takes NCHW planes, the depth model's input is %s", i, depth.Layout())
			}
		}
		return nil
	}
	if len(auxInputs) > 0 {
		return fmt.Errorf("auxue.inputs %v: the AuxUE computes its own features from the image and the depth (depth_input %q); leave inputs out", auxInputs, aux.DepthInput.Name)
	}
	d, a := depth.Input, aux.Input
	var diff []string
	cmp := func(key string, dv, av any) {
		if fmt.Sprint(dv) != fmt.Sprint(av) {
			diff = append(diff, fmt.Sprintf("input.%s: depth model %v, AuxUE %v", key, dv, av))
		}
	}
	cmp("layout", depth.Layout(), aux.Layout())
	cmp("channels", depth.channels(), aux.channels())
	cmp("height", d.Height, a.Height)
	cmp("width", d.Width, a.Width)
	cmp("color", orDefault(d.Color, ColorRGB), orDefault(a.Color, ColorRGB))
	cmp("pixel_range", depth.pixelRange(), aux.pixelRange())
	cmp("mean", depth.means(), aux.means())
	cmp("std", depth.stds(), aux.stds())
	if len(diff) > 0 {
		return fmt.Errorf("the AuxUE was built for another input than the depth model's (%s); retrain it with train auxue on this depth model",
			strings.Join(diff, "; "))
	}
	want := UnitsMetres
	if depth.Relative() {
		want = UnitsRelative
	}
	if aux.DepthInput.Units != want {
		return fmt.Errorf("auxue depth_input.units: %q, but the depth model's depth.meaning %q gives %s", aux.DepthInput.Units, depth.Depth.Meaning, want)
	}
	return nil
}

// DefaultAuxInputs are the sources of a features-input AuxUE that a config
// leaves out: the depth model's first feature output (made for the AuxUE),
// or else the image and the depth. An AuxUE that owns its inputs takes none.
func DefaultAuxInputs(depth, aux IOSpec) []string {
	if aux.OwnsInputs() {
		return nil
	}
	if len(depth.Features) > 0 {
		return []string{depth.Features[0].Name}
	}
	return []string{SourceImage, SourceDepth}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// wire checks the loaded models against each other and lays out the
// buffers.
func (m *Models) wire(log *slog.Logger) error {
	m.inW, m.inH = m.cfg.DepthSpec.Input.Width, m.cfg.DepthSpec.Input.Height
	m.outW, m.outH = m.depth.MapSize(0)
	m.depthOut = make([]float32, m.outW*m.outH)
	m.depthIn = m.depthOut
	if m.outW != m.inW || m.outH != m.inH {
		m.toInput = NewRemap(Fit(m.inW, m.inH, m.inW, m.inH, ResizeStretch), m.outW, m.outH)
		m.depthIn = make([]float32, m.inW*m.inH)
	}
	if m.aux == nil {
		return nil
	}
	if want := m.cfg.AuxUESpec.AuxUE; want != nil && want.DepthModelSHA256 != "" && want.DepthModelSHA256 != m.depth.SHA256() {
		log.Warn("the AuxUE was trained on another depth model file", "auxue", m.cfg.AuxUE,
			"trained_on_sha256", want.DepthModelSHA256, "depth", m.cfg.Depth, "depth_sha256", m.depth.SHA256())
	}
	m.auxW, m.auxH = m.aux.MapSize(0)
	if w, h := m.aux.MapSize(1); w != m.auxW || h != m.auxH {
		return fmt.Errorf("auxue model %q: scale map %dx%d and epistemic map %dx%d differ", m.cfg.AuxUE, m.auxW, m.auxH, w, h)
	}
	if m.cfg.AuxUESpec.OwnsInputs() {
		if f := m.cfg.AuxUESpec.ModelFeatures; f != nil {
			if m.featOut < 0 {
				return fmt.Errorf("auxue model_features: the depth model has no tensor %q", f.Tensor)
			}
			if got, want := m.depth.OutputShape(m.featOut), []int64{1, int64(f.Channels), int64(f.Height), int64(f.Width)}; fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("auxue model_features: the depth model's tensor %q has shape %v, the AuxUE was trained on %v; retrain it with train auxue on this depth model",
					f.Tensor, got, want)
			}
		}
		return nil
	}
	ash := m.aux.InputShape()
	aplane := int(ash[2] * ash[3])
	dst := m.aux.Input()
	off := 0
	var layout []string
	for _, name := range m.cfg.AuxInputs {
		var src []float32
		scale := float32(1)
		kind := auxSrcImage
		switch name {
		case SourceImage:
			src = m.depth.Input()
		case SourceDepth:
			src, scale, kind = m.depthOut, m.cfg.DepthScale, auxSrcDepth
			if scale == 0 {
				scale = 1
			}
		default:
			for i, n := range m.depth.OutputNames() {
				if n == name {
					src, kind = m.depth.Output(i), i
				}
			}
		}
		if len(src) == 0 || len(src)%aplane != 0 {
			return fmt.Errorf("auxue.inputs: %q has %d values, not a whole number of %dx%d planes (the AuxUE input is %v)",
				name, len(src), ash[3], ash[2], ash)
		}
		if off+len(src) > len(dst) {
			return fmt.Errorf("auxue.inputs %v: more channels than the AuxUE input %v has", m.cfg.AuxInputs, ash)
		}
		m.auxCopies = append(m.auxCopies, auxCopy{off: off, n: len(src), src: kind, scale: scale})
		layout = append(layout, fmt.Sprintf("%s:%d", name, len(src)/aplane))
		off += len(src)
	}
	if off != len(dst) {
		return fmt.Errorf("auxue.inputs %v give %d channels (%v), the AuxUE input %v wants %d",
			m.cfg.AuxInputs, off/aplane, layout, ash, ash[1])
	}
	return nil
}

// SetFocal gives the camera's focal length fx in pixels of frames calibW
// pixels wide (0: of the frames Infer gets; fx then follows the frame,
// fx_frame = fx W_frame / calibW). A depth output with canonical_focal
// (Metric3D) needs it: its metres are d_canonical f_input /
// canonical_focal, f_input = fx_frame CW / W_frame, CW the width the frame
// takes in the input. Each view (Share) has its own camera.
func (m *Models) SetFocal(fx float64, calibW int) error {
	if !(fx > 0) || math.IsInf(fx, 0) || calibW < 0 {
		return fmt.Errorf("camera focal length fx %g (of frames %d wide) must be positive and finite", fx, calibW)
	}
	m.fx, m.calibW = fx, calibW
	if m.haveGeo {
		m.setReadout()
	}
	return nil
}

// FrameFocal is SetFocal for frames that carry their own intrinsics (data
// sets): fx of frames w wide, taken when the read-out needs a focal length
// and fx is known (> 0); otherwise nothing changes.
func (m *Models) FrameFocal(fx float64, w int) {
	if m.NeedsFocal() && fx > 0 && !math.IsInf(fx, 0) && w > 0 && (fx != m.fx || w != m.calibW) {
		m.fx, m.calibW = fx, w
		if m.haveGeo {
			m.setReadout()
		}
	}
}

// NeedsFocal reports whether the depth read-out needs SetFocal.
func (m *Models) NeedsFocal() bool { return m.cfg.DepthSpec.Depth.NeedsFocal() }

// FocalFactor is the factor a camera-dependent depth output is multiplied
// by at the current frame size (f_input / canonical_focal); 1 otherwise.
func (m *Models) FocalFactor() float64 {
	if !m.NeedsFocal() || m.fx == 0 || !m.haveGeo {
		return 1
	}
	return m.focalFactor()
}

func (m *Models) focalFactor() float64 {
	fxFrame := m.fx
	if m.calibW > 0 {
		fxFrame = m.fx * float64(m.geo.FrameW) / float64(m.calibW)
	}
	return m.cfg.DepthSpec.Depth.FocalFactor(fxFrame, m.geo)
}

// setReadout folds the depth transform for the current frame size.
func (m *Models) setReadout() {
	f := 1.0
	if m.NeedsFocal() && m.fx > 0 {
		f = m.focalFactor()
	}
	m.readout = m.cfg.DepthSpec.Depth.Readout(f)
}

// focalReady refuses a camera-dependent read-out without the camera's fx.
func (m *Models) focalReady() error {
	if m.NeedsFocal() && m.fx == 0 {
		return fmt.Errorf("depth.canonical_focal %g: the depth model %q predicts depth for a canonical camera, and its metres need this camera's focal length: give the camera's intrinsics (intrinsics or intrinsics_file in the camera's config, --intrinsics for model run and eval-quick)",
			m.cfg.DepthSpec.Depth.CanonicalFocal, m.cfg.Depth)
	}
	return nil
}

// InputSize is the depth model's input width and height.
func (m *Models) InputSize() (w, h int) { return m.inW, m.inH }

// Relative reports whether the depth model is relative (Maps.Depth is
// relative inverse depth and Maps.Scale is b/depth).
func (m *Models) Relative() bool { return m.relative }

// DepthSession and AuxUESession expose the sessions (providers, stats).
func (m *Models) DepthSession() *Session { return m.depth }

// AuxUESession is nil when the models were opened without an AuxUE.
func (m *Models) AuxUESession() *Session { return m.aux }

// Geometry returns how a frame of w x h is fitted into the input.
func (m *Models) Geometry(w, h int) Geometry {
	return Fit(w, h, m.inW, m.inH, m.cfg.DepthSpec.ResizeMode())
}

// setFrame prepares the buffers for a frame size; it allocates only when
// the size changes.
func (m *Models) setFrame(w, h int) {
	if m.haveGeo && m.geo.FrameW == w && m.geo.FrameH == h {
		return
	}
	m.geo, m.haveGeo = m.Geometry(w, h), true
	m.resizer = NewResizer(m.geo.CW, m.geo.CH)
	m.canvas = nil
	if m.geo.CW != m.inW || m.geo.CH != m.inH {
		m.canvas = make([]uint8, 3*m.inW*m.inH) // black borders
	}
	m.setReadout()
	m.depthRemap = NewRemap(m.geo, m.outW, m.outH)
	m.frameDepth = make([]float32, w*h)
	if m.aux != nil {
		m.auxRemap = NewRemap(m.geo, m.auxW, m.auxH)
		m.frameScale, m.frameEpistem = make([]float32, w*h), make([]float32, w*h)
	}
}

// prepare fits the frame into the input and normalizes it into the depth
// model's input tensor; it returns the input-size RGB8 image.
func (m *Models) prepare(rgb []uint8, w, h int) ([]uint8, error) {
	if w <= 0 || h <= 0 || len(rgb) < 3*w*h {
		return nil, fmt.Errorf("preprocess: frame of %d bytes is not a %dx%d RGB image", len(rgb), w, h)
	}
	m.setFrame(w, h)
	img, err := m.resizer.Resize(rgb, w, h)
	if err != nil {
		return nil, fmt.Errorf("preprocess: %w", err)
	}
	if m.canvas != nil {
		g := m.geo
		for y := 0; y < g.CH; y++ {
			copy(m.canvas[3*((g.Y0+y)*m.inW+g.X0):], img[3*y*g.CW:3*(y+1)*g.CW])
		}
		img = m.canvas
	}
	if err := m.depth.SetImageRGB8(img, m.inW, m.inH, 3*m.inW); err != nil {
		return nil, fmt.Errorf("preprocess: %w", err)
	}
	return img, nil
}

// runDepth runs the depth model on the prepared input and reads the depth
// on its output grid and on the input grid.
func (m *Models) runDepth(ctx context.Context) error {
	fr, err := m.depth.Run(ctx)
	if err != nil {
		return err
	}
	if !fr.Valid {
		return m.nonFinite(m.depth, fr)
	}
	if err := m.focalReady(); err != nil {
		return err
	}
	if _, err := m.depth.DepthSlotReadout(0, m.depthOut, m.readout); err != nil {
		return err
	}
	if m.toInput != nil {
		return m.toInput.Apply(m.depthOut, m.depthIn)
	}
	return nil
}

// RunDepth runs the depth model alone on an interleaved RGB8 frame.
func (m *Models) RunDepth(ctx context.Context, rgb []uint8, w, h int) (DepthPass, error) {
	if _, err := m.prepare(rgb, w, h); err != nil {
		return DepthPass{}, err
	}
	if err := m.runDepth(ctx); err != nil {
		return DepthPass{}, err
	}
	frame := m.depthOut
	if !m.depthRemap.Identity() {
		if err := m.depthRemap.Apply(m.depthOut, m.frameDepth); err != nil {
			return DepthPass{}, err
		}
		frame = m.frameDepth
	}
	for j, i := range m.tensorOut { // the outputs' memory may change with a provider fallback
		m.tensors[j] = m.depth.Output(i)
	}
	return DepthPass{Geometry: m.geo, Image: m.depth.Input(), Depth: m.depthIn, Frame: frame, Relative: m.relative, Tensors: m.tensors}, nil
}

// Infer runs both models on an interleaved RGB8 frame of any size and
// returns the maps at the frame's size. It allocates nothing once the
// frame size is known.
func (m *Models) Infer(ctx context.Context, rgb []uint8, w, h int) (Maps, error) {
	var t StageTimes
	maps, _, err := m.InferTimed(ctx, rgb, w, h, &t)
	return maps, err
}

// InferTimed is Infer that also returns the input-size RGB8 image the
// depth model saw and fills the stage times.
func (m *Models) InferTimed(ctx context.Context, rgb []uint8, w, h int, t *StageTimes) (Maps, []uint8, error) {
	if m.aux == nil {
		return Maps{}, nil, errors.New("infer: the models were opened without an AuxUE")
	}
	t0 := time.Now()
	img, err := m.prepare(rgb, w, h)
	if err != nil {
		return Maps{}, nil, err
	}
	t.Preprocess = time.Since(t0)
	m.one[0] = m
	if err := m.runSlots(ctx, m.one[:], t); err != nil {
		return Maps{}, nil, err
	}
	return m.res, img, m.resErr
}

// nonFinite is the fault of a frame whose outputs of s held NaN or Inf:
// counted per model by the session (Stats().FlaggedFrames) and logged
// here at most once per lograte interval per model, with the counts.
func (m *Models) nonFinite(s *Session, fr Frame) error {
	st := s.Stats()
	m.rl.Log(slog.LevelWarn, "non-finite "+s.path, "model output holds NaN or Inf: frame not assessed",
		"model", s.role(), "path", s.path, "provider", s.Provider(), "non_finite_per_output", fmt.Sprint(fr.NonFinite),
		"flagged_frames_total", st.FlaggedFrames, "frames_total", st.Frames)
	return &ModelFault{Model: s.role(), Path: s.path, Provider: s.Provider(), Kind: FaultNonFinite, Err: ErrInvalidOutput}
}

// Close releases both sessions.
func (m *Models) Close() error {
	if m.rl != nil && !m.shared {
		m.rl.Flush()
	}
	if m.shared {
		m.depth, m.aux = nil, nil
		return nil
	}
	var err error
	if m.aux != nil {
		err = m.aux.Close()
		m.aux = nil
	}
	if m.depth != nil {
		err = errors.Join(err, m.depth.Close())
		m.depth = nil
	}
	return err
}
