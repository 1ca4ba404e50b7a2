package infer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/didoedge/didoedge/internal/boundedfile"

	"github.com/didoedge/didoedge/internal/nonfinite"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// ErrClosed is returned by Run after Close.
var ErrClosed = errors.New("infer: session closed")

// ErrFixedBatch marks a batch size above 1 asked of a model whose batch
// dimension is fixed.
var ErrFixedBatch = errors.New("the model's batch dimension is fixed")

// Session runs one model on one execution provider with input and output
// tensors allocated once; Run allocates nothing. It is safe for concurrent
// use, but runs are serialized (they share the tensors).
type Session struct {
	mu       sync.Mutex
	path     string
	spec     IOSpec
	lib      onnxrt.Library
	provider string
	sess     *ort.AdvancedSession   // batch 1
	inputs   []*ort.Tensor[float32] // batch maxBatch (their data: every slot)
	inShapes []ort.Shape            // batch 1
	outputs  []*ort.Tensor[float32] // batch maxBatch
	inPer    []int                  // values of one frame per input
	outPer   []int                  // per output
	// Batched runs (maxBatch > 1): one dynamic session and, per batch size
	// n, tensors of batch n over the first n slots of inputs/outputs and an
	// IoBinding of them, made once, so that a run of any n allocates
	// nothing.
	maxBatch  int
	dynamic   bool // the model's batch dimension is symbolic
	dyn       *ort.DynamicAdvancedSession
	bindings  []*ort.IoBinding         // [n-1]
	inShared  []bool                   // per input: memory of another session (SharedInputs)
	batchVals [][]*ort.Tensor[float32] // [n-1]: inputs then outputs of batch n
	// batchIns are the input values bound in bindings[n-1], to bind again
	// before each run on a GPU provider: ONNX Runtime's BindInput copies a
	// host value to the device once, at bind time (IOBinding::BindInput,
	// CopyOneInputAcrossDevices), so a binding made once would run every
	// frame on the first frame's inputs.
	batchIns  [][]ort.Value
	slotValid []bool
	outNames  []string
	outMaps   [][2]int // (h, w) of the map outputs (depth, scale, epistemic); 0 otherwise
	nonFinite []int
	pixels    PixelTransform
	// inCast and outCast are the model's own tensors of the inputs and
	// outputs that are not float32 (nil entries for float32 ones).
	inCast, outCast []*onnxrt.Cast
	inTypes         []ort.TensorElementDataType
	release         func() error
	sha             string
	// fileSHA is the file's sha256 when the session runs an edited copy
	// of it (SessionOptions.Expose); "" = sha.
	fileSHA string
	// Execution provider state (faults.go): the configured list, the index
	// of the one in use, ONNX Runtime's node placement, the fault policy's
	// counters, and the model and settings a rebuild needs.
	providers   []onnxrt.ProviderConfig
	providerIdx int
	placement   onnxrt.Placement
	data        []byte
	cfg         onnxrt.Config
	log         *slog.Logger
	faults      faultState
	// pools is the environment's global thread pool the session runs on;
	// nil when it has its own (thread_pool: session).
	pools *onnxrt.GlobalPools
	// dev is the device-resident binding (device.go); nil on the host path.
	dev *devIO

	frames, flagged, nonFiniteValues atomic.Uint64
}

// Frame reports the health of one Run's outputs.
type Frame struct {
	// NonFinite counts NaN and ±Inf values per output, in the order of
	// Output. The slice is reused by the next Run.
	NonFinite []int
	// Valid is false when any output holds a non-finite value; such a frame
	// must not be used as depth.
	Valid bool
	// SlotValid is Valid per frame of a batch (one entry for Run); reused
	// by the next run.
	SlotValid []bool
	// Run is how long ONNX Runtime took to execute the model, without the
	// scan of the outputs (the caller's read-out time).
	Run time.Duration
	// Copy is the time of the explicit host/device copies of the device
	// path (device.go): the inputs' upload and the maps' download; 0 on
	// the host path, where ONNX Runtime copies inside Run.
	Copy time.Duration
}

// Stats are cumulative counters for metrics.
type Stats struct {
	Frames          uint64 // successful runs
	FlaggedFrames   uint64 // runs with at least one non-finite output value
	NonFiniteValues uint64 // NaN/Inf values seen in all outputs
}

// SessionOptions are a session's settings beyond the inference config.
type SessionOptions struct {
	// MaxBatch is the most frames one run takes (RunBatch); 0 or 1 = one.
	// Above 1 the model's batch dimension (dim 0 of every input and
	// output) must be symbolic: a fixed-batch model is refused, unless
	// IfDynamic.
	MaxBatch int
	// IfDynamic opens a fixed-batch model with batch 1 instead of
	// refusing MaxBatch > 1 (a default, not a user's request).
	IfDynamic bool
	// SharedInputs[i], when not nil, is the memory of input i instead of
	// a buffer of the session's own: another session's tensor that holds
	// the same values (the AuxUE's image input is the depth model's), so
	// that no copy runs between the two. It is used when its frames have
	// the input's size and it holds at least MaxBatch of them (frame k at
	// k times the frame size, as in every session); InputShared says
	// whether it was.
	SharedInputs []SharedInput
	// SkipAlpha: an AuxUE's alpha output is checked against the spec
	// (shape, K) but not fetched, so ONNX Runtime does not copy it out
	// and the NaN/Inf scan does not read it (32x48x160 values for the
	// reference AuxUE, 40 % of its outputs). Models sets it: nothing
	// reads alpha at run time, and a non-finite alpha shows in the
	// epistemic map computed from it.
	SkipAlpha bool
	// Expose names intermediate tensors of the model to add as extra graph
	// outputs before loading it (pkg/onnx.Expose, in memory; the file is
	// not touched): a depth model's tensor that an AuxUE reads
	// (model_features). Tensors that already are outputs are left alone.
	Expose []string
}

// SharedInput is memory of another session's input: Data holds frames of
// FrameSize values each.
type SharedInput struct {
	Data      []float32
	FrameSize int
}

// NewSession loads the model at path, checks it against spec, and creates a
// session on the first execution provider in cfg that works. A provider that
// fails is logged once at WARN with the reason and the next one is tried.
func NewSession(ctx context.Context, path string, spec IOSpec, cfg onnxrt.Config, log *slog.Logger) (*Session, error) {
	return OpenSession(ctx, path, spec, cfg, SessionOptions{}, log)
}

// OpenSession is NewSession with a batch size (SessionOptions).
func OpenSession(ctx context.Context, path string, spec IOSpec, cfg onnxrt.Config, so SessionOptions, log *slog.Logger) (*Session, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("inference config: %w", err)
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("model io spec: %w", err)
	}
	data, err := boundedfile.Read("", path, boundedfile.Model)
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	fileSHA := ""
	if len(so.Expose) > 0 {
		sum := sha256.Sum256(data)
		fileSHA = hex.EncodeToString(sum[:])
		if data, err = ExposeTensors(data, so.Expose); err != nil {
			return nil, fmt.Errorf("load model %q: %w", path, err)
		}
	}
	lib, pools, release, err := onnxrt.AcquireEnv(cfg.Library, cfg.WantsGPU(), cfg.GlobalPool(), log)
	if err != nil {
		return nil, err
	}
	s := &Session{path: path, spec: spec, lib: lib, pools: pools, release: release, maxBatch: max(1, so.MaxBatch), log: log, cfg: cfg, fileSHA: fileSHA}
	if err := s.init(ctx, data, cfg, so, log); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Session) init(ctx context.Context, data []byte, cfg onnxrt.Config, so SessionOptions, log *slog.Logger) error {
	inputs, outputs, err := ort.GetInputOutputInfoWithONNXData(data)
	if err != nil {
		return fmt.Errorf("load model %q: not a loadable ONNX model: %w", s.path, err)
	}
	if !s.spec.IsAuxUE() && s.spec.Depth.Name == "" {
		name, err := finestOutput(data, s.spec, inputs, outputs)
		if err != nil {
			return fmt.Errorf("model %q: depth.name: %w", s.path, err)
		}
		s.spec.Depth.Name = name
		log.Info("depth output chosen: the finest map", "model", s.path, "output", name)
	}
	inShapes, outShapes, inTypes, outTypes, err := matchSpec(s.spec, inputs, outputs)
	if err != nil {
		return fmt.Errorf("model %q does not match its io spec: %w", s.path, err)
	}
	s.inTypes = inTypes
	var fixed string
	s.dynamic, fixed = batchDynamic(s.spec, inputs, outputs)
	if s.maxBatch > 1 && !s.dynamic {
		if !so.IfDynamic {
			return fmt.Errorf("batch size %d: model %q has a fixed batch dimension (%s); make it dynamic with `didoedge model batch %s --out FILE`, or use batch size 1: %w",
				s.maxBatch, s.path, fixed, s.path, ErrFixedBatch)
		}
		s.maxBatch = 1
	}
	s.inShapes = inShapes
	s.outNames = s.spec.outputNames()
	s.pixels = s.spec.Pixels()
	if needsProbe(outShapes) {
		if outShapes, err = probeOutputShapes(data, s.spec.inputNames(), inShapes, inTypes, s.outNames); err != nil {
			return fmt.Errorf("model %q: %w", s.path, err)
		}
	}
	if err := checkOutputShapes(s.spec, outShapes, inputs, outputs); err != nil {
		return fmt.Errorf("model %q does not match its io spec: %w", s.path, err)
	}
	if s.maxBatch > 1 {
		for i, sh := range outShapes {
			if len(sh) == 0 || sh[0] != 1 {
				return fmt.Errorf("batch size %d: model %q: output %q has shape %v, want its batch (dim 0) first", s.maxBatch, s.path, s.outNames[i], sh)
			}
		}
	}
	if so.SkipAlpha && s.spec.IsAuxUE() && s.spec.Alpha.Name != "" {
		// alpha is the last output (outputNames).
		s.outNames, outShapes = s.outNames[:len(s.outNames)-1], outShapes[:len(outShapes)-1]
		outTypes = outTypes[:len(outTypes)-1]
	}
	s.inShared = make([]bool, len(inShapes))
	for i, sh := range inShapes {
		full := onnxrt.WithBatch(sh, s.maxBatch)
		var t *ort.Tensor[float32]
		var err error
		if i < len(so.SharedInputs) && so.SharedInputs[i].usable(sh.FlattenedSize(), full.FlattenedSize()) {
			t, err = ort.NewTensor(full, so.SharedInputs[i].Data[:full.FlattenedSize()])
			s.inShared[i] = err == nil
		} else {
			t, err = ort.NewEmptyTensor[float32](full)
		}
		if err != nil {
			return fmt.Errorf("model %q: allocate input %v: %w", s.path, sh, err)
		}
		s.inputs = append(s.inputs, t)
		s.inPer = append(s.inPer, int(sh.FlattenedSize()))
		var c *onnxrt.Cast
		if inTypes[i] != ort.TensorElementDataTypeFloat {
			if c, err = onnxrt.NewCast(inTypes[i], full, int(sh.FlattenedSize())); err != nil {
				return fmt.Errorf("model %q: input %v: %w", s.path, sh, err)
			}
		}
		s.inCast = append(s.inCast, c)
	}
	roles := s.spec.outputRoles()
	s.outMaps = make([][2]int, len(outShapes))
	for i, sh := range outShapes {
		t, err := ort.NewEmptyTensor[float32](onnxrt.WithBatch(sh, s.maxBatch))
		if err != nil {
			return fmt.Errorf("model %q: allocate output %q %v: %w", s.path, s.outNames[i], sh, err)
		}
		s.outputs = append(s.outputs, t)
		s.outPer = append(s.outPer, int(sh.FlattenedSize()))
		var c *onnxrt.Cast
		if outTypes[i] != ort.TensorElementDataTypeFloat {
			if c, err = onnxrt.NewCast(outTypes[i], onnxrt.WithBatch(sh, s.maxBatch), int(sh.FlattenedSize())); err != nil {
				return fmt.Errorf("model %q: output %q: %w", s.path, s.outNames[i], err)
			}
		}
		s.outCast = append(s.outCast, c)
		if roles[i] == RoleDepth || roles[i] == RoleScale || roles[i] == RoleEpistemic || roles[i] == RoleConfidence {
			h, w, _ := MapShape(sh)
			s.outMaps[i] = [2]int{h, w}
		}
	}
	s.nonFinite = make([]int, len(s.outputs))
	s.slotValid = make([]bool, s.maxBatch)

	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	s.sha = sha
	s.data, s.providers = data, cfg.EffectiveProviders()
	allocated := s.maxBatch
	var reasons []string
	for i, p := range s.providers {
		if err := ctx.Err(); err != nil {
			return err
		}
		// A default batch (IfDynamic) is for GPU providers: on the CPU a
		// run's cost grows with its frames, so a session that ends on the
		// CPU runs one frame per run (runtime.Config.DefaultBatchSize).
		batch := allocated
		if so.IfDynamic && !p.GPU() {
			batch = 1
		}
		err := s.open(p, batch)
		if err == nil {
			err = s.checkRequired(i, p)
		}
		if err == nil {
			s.provider, s.providerIdx, s.maxBatch = p.Name, i, batch
			log.Info("model session", "model", s.path, "provider", p.Name, "batch", batch, "nodes", s.placement.String())
			return nil
		}
		s.destroySessions()
		if p.Required {
			return fmt.Errorf("model %q: inference.providers[%d].required: %s is required, but it cannot run the model: %w", s.path, i, p.Name, err)
		}
		reasons = append(reasons, fmt.Sprintf("%s: %v", p.Name, err))
		if i+1 < len(s.providers) {
			log.Warn("execution provider unavailable, falling back", "model", s.path,
				"provider", p.Name, "next", s.providers[i+1].Name, "reason", oneLine(err))
		}
	}
	return fmt.Errorf("model %q: no execution provider could run it (%s)", s.path, strings.Join(reasons, "; "))
}

// open creates the ONNX Runtime session on provider p with batch frames
// per run at most (a dynamic session with an IoBinding per batch size
// when the tensors hold more than one frame), and reads ONNX Runtime's
// node placement.
func (s *Session) open(p onnxrt.ProviderConfig, batch int) error {
	var err error
	if s.inputs[0].GetShape()[0] > 1 {
		err = s.createBatched(s.data, s.cfg, p, s.sha, batch)
	} else {
		s.sess, err = s.create(s.data, s.cfg, p, s.sha, s.inValues(), s.outValues())
	}
	if err != nil {
		return err
	}
	s.placement = nil
	if !onnxrt.RecordsPlacement(s.lib) {
		return nil
	}
	ptr, err := s.sessionPointer()
	if err == nil {
		s.placement, err = onnxrt.NodeAssignment(s.lib.Path, ptr)
	}
	if err != nil {
		s.log.Warn("node placement unavailable", "model", s.path, "err", err)
	}
	return nil
}

// inValues and outValues are the session's tensors as the binding's
// values: the model's own tensor (cast) for an input or output that is not
// float32, the float32 tensor otherwise.
func (s *Session) inValues() []ort.Value {
	v := make([]ort.Value, len(s.inputs))
	for i, t := range s.inputs {
		v[i] = t
		if c := s.inCast[i]; c != nil {
			v[i] = c.Full
		}
	}
	return v
}

func (s *Session) outValues() []ort.Value {
	v := make([]ort.Value, len(s.outputs))
	for i, t := range s.outputs {
		v[i] = t
		if c := s.outCast[i]; c != nil {
			v[i] = c.Full
		}
	}
	return v
}

// sessionPointer is the OrtSession* of the session in use.
func (s *Session) sessionPointer() (unsafe.Pointer, error) {
	if s.dyn != nil {
		return onnxrt.DynamicSessionPointer(s.dyn)
	}
	if s.sess != nil {
		return onnxrt.SessionPointer(s.sess)
	}
	return nil, errors.New("no session")
}

// destroySessions releases the ONNX Runtime session, its IoBindings and
// the batch views of the tensors, keeping the tensors themselves (their
// memory may be another session's input: SharedInputs).
func (s *Session) destroySessions() error {
	var errs []error
	if s.sess != nil {
		errs = append(errs, s.sess.Destroy())
		s.sess = nil
	}
	for _, b := range s.bindings {
		errs = append(errs, b.Destroy())
	}
	s.bindings = nil
	if s.dyn != nil {
		errs = append(errs, s.dyn.Destroy())
		s.dyn = nil
	}
	for _, vals := range s.batchVals {
		for _, t := range vals {
			errs = append(errs, t.Destroy())
		}
	}
	s.batchVals, s.batchIns = nil, nil
	return errors.Join(errs...)
}

// create builds the session for one provider. Provider initialization may
// install native signal handlers over Go's; they are restored afterwards.
func (s *Session) create(data []byte, cfg onnxrt.Config, p onnxrt.ProviderConfig, sha string, inputs, outputs []ort.Value) (*ort.AdvancedSession, error) {
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("session options: %w", err)
	}
	defer opts.Destroy()
	if err := s.setThreading(opts, cfg); err != nil {
		return nil, err
	}
	if err := onnxrt.RecordPlacement(opts, s.lib); err != nil {
		return nil, err
	}
	var sess *ort.AdvancedSession
	onnxrt.WithSignalsPreserved(func() {
		if err = onnxrt.AppendProvider(opts, s.lib.Path, p, sha, s.inShapes[0], nil); err != nil {
			return
		}
		sess, err = ort.NewAdvancedSessionWithONNXData(data, s.spec.inputNames(), s.outNames,
			inputs, outputs, opts)
	})
	return sess, err
}

// setThreading puts the session on the global pool, or sizes its own pool;
// either way spinning follows thread_spinning (the session entries matter
// only for a session's own pools, the global pool got it at creation).
func (s *Session) setThreading(opts *ort.SessionOptions, cfg onnxrt.Config) error {
	spin := onnxrt.BoolFlag(cfg.ThreadSpinning)
	for _, key := range []string{"session.intra_op.allow_spinning", "session.inter_op.allow_spinning"} {
		if err := opts.AddSessionConfigEntry(key, spin); err != nil {
			return fmt.Errorf("thread_spinning: %s: %w", key, err)
		}
	}
	if s.pools != nil {
		if err := s.pools.UseGlobalPools(opts); err != nil {
			return fmt.Errorf("thread_pool: %w", err)
		}
		return nil
	}
	if cfg.IntraOpThreads > 0 {
		if err := opts.SetIntraOpNumThreads(cfg.IntraOpThreads); err != nil {
			return fmt.Errorf("intra_op_threads: %w", err)
		}
	}
	return nil
}

// ThreadPool reports the pool the session's parallel operators run on:
// ThreadPoolGlobal or ThreadPoolSession.
func (s *Session) ThreadPool() string {
	if s.pools != nil {
		return onnxrt.ThreadPoolGlobal
	}
	return onnxrt.ThreadPoolSession
}

// Run executes the model on the current input tensor (slot 0) and scans
// the outputs for NaN and Inf. It allocates nothing.
func (s *Session) Run(ctx context.Context) (Frame, error) { return s.RunBatch(ctx, 1) }

// RunBatch executes the model on the first n slots of the inputs (1 <= n
// <= MaxBatch) and scans their outputs for NaN and Inf, slot by slot. It
// allocates nothing.
func (s *Session) RunBatch(ctx context.Context, n int) (Frame, error) {
	if err := ctx.Err(); err != nil {
		return Frame{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == nil && s.dyn == nil {
		return Frame{}, ErrClosed
	}
	if n < 1 || n > s.maxBatch {
		return Frame{}, fmt.Errorf("run model %q: batch of %d frames, the session takes 1 to %d", s.path, n, s.maxBatch)
	}
	for i, c := range s.inCast {
		if c != nil {
			c.From(s.inputs[i].GetData(), n)
		}
	}
	var copies time.Duration
	if s.dev != nil {
		t := time.Now()
		if err := s.uploadInputs(n); err != nil {
			return Frame{}, err
		}
		copies = time.Since(t)
	}
	t0 := time.Now()
	if err := s.runPolicy(n); err != nil {
		return Frame{}, err
	}
	run := time.Since(t0)
	if s.dev != nil {
		t := time.Now()
		if err := s.downloadOutputs(n); err != nil {
			return Frame{}, err
		}
		copies += time.Since(t)
	}
	for i, c := range s.outCast {
		if c != nil {
			c.Into(s.outputs[i].GetData(), n)
		}
	}
	var total int
	for i := range s.nonFinite {
		s.nonFinite[i] = 0
	}
	for k := range n {
		bad := 0
		for i, t := range s.outputs {
			if s.dev != nil && !s.dev.outs[i].download {
				continue // on the device only: its NaN/Inf shows in the AuxUE's maps
			}
			per := s.outPer[i]
			c := nonfinite.Count(t.GetData()[k*per : (k+1)*per])
			s.nonFinite[i] += c
			bad += c
		}
		s.slotValid[k] = bad == 0
		s.frames.Add(1)
		if bad > 0 {
			s.flagged.Add(1)
		}
		total += bad
	}
	s.nonFiniteValues.Add(uint64(total))
	return Frame{NonFinite: s.nonFinite, Valid: total == 0, SlotValid: s.slotValid[:n], Run: run, Copy: copies}, nil
}

// Input returns the first input tensor's backing slice (the image, or an
// AuxUE's features), in the spec's layout; fill it before Run. With a
// batch, the first frame's slot.
func (s *Session) Input() []float32 { return s.InputSlot(0, 0) }

// InputAt returns input i's backing slice: 0 the image (or features),
// 1 an AuxUE's depth input (the first frame's slot).
func (s *Session) InputAt(i int) []float32 { return s.InputSlot(i, 0) }

// InputSlot returns input i's values of frame k of a batch.
func (s *Session) InputSlot(i, k int) []float32 {
	per := s.inPer[i]
	return s.inputs[i].GetData()[k*per : (k+1)*per]
}

// OutputSlot returns output i of frame k of the last run, valid until the
// next run.
func (s *Session) OutputSlot(i, k int) []float32 {
	per := s.outPer[i]
	return s.outputs[i].GetData()[k*per : (k+1)*per]
}

// usable reports whether the shared memory can hold this input: frames of
// the same size and enough of them.
func (si SharedInput) usable(frame, total int64) bool {
	return si.Data != nil && int64(si.FrameSize) == frame && int64(len(si.Data)) >= total
}

// InputShared reports whether input i lives in another session's memory
// (SessionOptions.SharedInputs).
func (s *Session) InputShared(i int) bool { return i < len(s.inShared) && s.inShared[i] }

// MaxBatch is the most frames one run takes (1 unless the session was
// opened with a batch size and the model's batch is dynamic).
func (s *Session) MaxBatch() int { return s.maxBatch }

// DynamicBatch reports whether the model's batch dimension is symbolic.
func (s *Session) DynamicBatch() bool { return s.dynamic }

// InputShape returns the first input's shape of one frame: (1,C,H,W) or (1,H,W,C).
func (s *Session) InputShape() []int64 { return s.inShapes[0] }

// Spec returns the IO spec the session was opened with (an empty depth
// name resolved to the output chosen).
func (s *Session) Spec() IOSpec { return s.spec }

// InputType names the element type the model takes for input i
// (float32, float16 or uint8).
func (s *Session) InputType(i int) string { return onnxrt.TypeName(s.inTypes[i]) }

// SHA256 is the model file's sha256 (hex), also when the session runs a
// copy with exposed tensors.
func (s *Session) SHA256() string {
	if s.fileSHA != "" {
		return s.fileSHA
	}
	return s.sha
}

// Path is the model file.
func (s *Session) Path() string { return s.path }

// Output returns output i as the tensor's backing slice, valid until the
// next Run. Depth models: 0 = depth, then the features in spec order;
// AuxUEs: 0 = scale, 1 = epistemic, 2 = alpha when the spec names it.
// With a batch, the first frame's slot.
func (s *Session) Output(i int) []float32 { return s.OutputSlot(i, 0) }

// OutputShape returns the shape of output i for one frame.
func (s *Session) OutputShape(i int) []int64 { return onnxrt.WithBatch(s.outputs[i].GetShape(), 1) }

// MapSize is the (width, height) of map output i (depth, scale,
// epistemic), whatever its rank (MapShape); 0, 0 for other outputs.
func (s *Session) MapSize(i int) (w, h int) { return s.outMaps[i][1], s.outMaps[i][0] }

// OutputNames lists the outputs in the order Output indexes them.
func (s *Session) OutputNames() []string { return s.outNames }

// Provider names the execution provider in use (for logs and metrics).
//
// It is the configured provider the session was created with (or rebuilt
// on, faults.go); where ONNX Runtime actually assigned the nodes is
// Placement.
func (s *Session) Provider() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.provider
}

// Library reports the ONNX Runtime library in use.
func (s *Session) Library() onnxrt.Library { return s.lib }

// Stats returns the cumulative run counters.
func (s *Session) Stats() Stats {
	return Stats{Frames: s.frames.Load(), FlaggedFrames: s.flagged.Load(), NonFiniteValues: s.nonFiniteValues.Load()}
}

// Close releases the session, its tensors and its reference on the ONNX
// Runtime environment. It is safe to call more than once.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeDevice()
	errs := []error{s.destroySessions(), s.faults.close()}
	for _, t := range s.outputs {
		errs = append(errs, t.Destroy())
	}
	s.outputs = nil
	for _, c := range append(s.inCast, s.outCast...) {
		if c != nil {
			errs = append(errs, c.Destroy())
		}
	}
	s.inCast, s.outCast = nil, nil
	for _, t := range s.inputs {
		errs = append(errs, t.Destroy())
	}
	s.inputs = nil
	if s.release != nil {
		errs = append(errs, s.release())
		s.release = nil
	}
	return errors.Join(errs...)
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
