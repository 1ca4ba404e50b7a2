package infer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// Confidence is the depth model's own confidence read into an
	// uncertainty u (ConfidenceSpec.Readout: larger is less trustworthy,
	// NaN where the model gave no confidence); nil when its spec has no
	// confidence output.
	Confidence []float32
	Relative   bool
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
	Confidence       []float32 // on the depth grid; nil without a confidence output
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
	Frame []float32
	// Confidence and FrameConfidence are the depth model's confidence
	// read-out u (Maps.Confidence) on the depth output's grid and at the
	// frame's size; nil without a confidence output.
	Confidence, FrameConfidence []float32
	Relative                    bool
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
	// confOut is the depth model's confidence output (-1: none), read
	// into confMap on its grid through confRead.
	confOut  int
	confRead ConfidenceReadout
	confMap  []float32
	dev      *modelsDev // the device path, shared by the views

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
	frameConf                            []float32
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
	m := &Models{cfg: cfg, relative: cfg.DepthSpec.Relative(), rl: lograte.New(log, 0), featOut: -1, confOut: -1}
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
		tensorOut: m.tensorOut, tensors: make([][]float32, len(m.tensors)), featOut: m.featOut, confOut: m.confOut, dev: m.dev}
	// m's wire already warned about anything worth a warning.
	if err := v.wire(slog.New(slog.DiscardHandler)); err != nil {
		return nil, err
	}
	return v, nil
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
	if m.confMap != nil {
		m.frameConf = make([]float32, w*h)
	}
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
	m.readConfidence(0)
	if m.toInput != nil {
		return m.toInput.Apply(m.depthOut, m.depthIn)
	}
	return nil
}

// readConfidence reads the confidence output of batch slot k into the
// view's confidence map (nothing without a confidence output). Values
// outside the meaning's domain become NaN; they are logged at a bounded
// rate.
func (m *Models) readConfidence(k int) {
	if m.confOut < 0 {
		return
	}
	if bad := m.confRead.Apply(m.confMap, m.depth.OutputSlot(m.confOut, k)); bad > 0 {
		m.rl.Warn("confidence", "the depth model's confidence has values outside its meaning's domain (read as no confidence)",
			"depth", m.cfg.Depth, "output", m.cfg.DepthSpec.Confidence.Name, "meaning", m.confRead.Meaning(), "pixels", bad)
	}
}

// RunDepth runs the depth model alone on an interleaved RGB8 frame.
func (m *Models) RunDepth(ctx context.Context, rgb []uint8, w, h int) (DepthPass, error) {
	if _, err := m.prepare(rgb, w, h); err != nil {
		return DepthPass{}, err
	}
	if err := m.runDepth(ctx); err != nil {
		return DepthPass{}, err
	}
	frame, frameConf := m.depthOut, m.confMap
	if !m.depthRemap.Identity() {
		if err := m.depthRemap.Apply(m.depthOut, m.frameDepth); err != nil {
			return DepthPass{}, err
		}
		frame = m.frameDepth
		if m.confMap != nil {
			if err := m.depthRemap.Apply(m.confMap, m.frameConf); err != nil {
				return DepthPass{}, err
			}
			frameConf = m.frameConf
		}
	}
	for j, i := range m.tensorOut { // the outputs' memory may change with a provider fallback
		m.tensors[j] = m.depth.Output(i)
	}
	return DepthPass{Geometry: m.geo, Image: m.depth.Input(), Depth: m.depthIn, Frame: frame, Relative: m.relative, Tensors: m.tensors,
		Confidence: m.confMap, FrameConfidence: frameConf}, nil
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
	// After both sessions released their device tensors: the copies'
	// stream and the device API go last.
	return errors.Join(err, m.dev.closeAPI())
}
