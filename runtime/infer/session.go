package infer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	ort "github.com/yalue/onnxruntime_go"
)

// ErrClosed is returned by Run after Close.
var ErrClosed = errors.New("infer: session closed")

// Session runs one model on one execution provider with input and output
// tensors allocated once; Run allocates nothing. It is safe for concurrent
// use, but runs are serialized (they share the tensors).
type Session struct {
	mu        sync.Mutex
	path      string
	spec      IOSpec
	lib       Library
	provider  string
	sess      *ort.AdvancedSession
	inputs    []*ort.Tensor[float32]
	inShapes  []ort.Shape
	outputs   []*ort.Tensor[float32]
	outNames  []string
	outMaps   [][2]int // (h, w) of the map outputs (depth, scale, epistemic); 0 otherwise
	nonFinite []int
	pixels    PixelTransform
	release   func() error
	sha       string
	// pools is the environment's global thread pool the session runs on;
	// nil when it has its own (thread_pool: session).
	pools *globalPools

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
}

// Stats are cumulative counters for metrics.
type Stats struct {
	Frames          uint64 // successful runs
	FlaggedFrames   uint64 // runs with at least one non-finite output value
	NonFiniteValues uint64 // NaN/Inf values seen in all outputs
}

// NewSession loads the model at path, checks it against spec, and creates a
// session on the first execution provider in cfg that works. A provider that
// fails is logged once at WARN with the reason and the next one is tried.
func NewSession(ctx context.Context, path string, spec IOSpec, cfg Config, log *slog.Logger) (*Session, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("inference config: %w", err)
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("model io spec: %w", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lib, pools, release, err := acquire(cfg.Library, cfg.globalPool())
	if err != nil {
		return nil, err
	}
	s := &Session{path: path, spec: spec, lib: lib, pools: pools, release: release}
	if err := s.init(ctx, data, cfg, log); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Session) init(ctx context.Context, data []byte, cfg Config, log *slog.Logger) error {
	inputs, outputs, err := ort.GetInputOutputInfoWithONNXData(data)
	if err != nil {
		return fmt.Errorf("load model %q: not a loadable ONNX model: %w", s.path, err)
	}
	inShapes, outShapes, err := matchSpec(s.spec, inputs, outputs)
	if err != nil {
		return fmt.Errorf("model %q does not match its io spec: %w", s.path, err)
	}
	s.inShapes = inShapes
	s.outNames = s.spec.outputNames()
	s.pixels = s.spec.Pixels()
	if needsProbe(outShapes) {
		if outShapes, err = probeOutputShapes(data, s.spec.inputNames(), inShapes, s.outNames); err != nil {
			return fmt.Errorf("model %q: %w", s.path, err)
		}
	}
	if err := checkOutputShapes(s.spec, outShapes, inputs, outputs); err != nil {
		return fmt.Errorf("model %q does not match its io spec: %w", s.path, err)
	}
	ins := make([]ort.Value, len(inShapes))
	for i, sh := range inShapes {
		t, err := ort.NewEmptyTensor[float32](sh)
		if err != nil {
			return fmt.Errorf("model %q: allocate input %v: %w", s.path, sh, err)
		}
		s.inputs = append(s.inputs, t)
		ins[i] = t
	}
	values := make([]ort.Value, len(outShapes))
	roles := s.spec.outputRoles()
	s.outMaps = make([][2]int, len(outShapes))
	for i, sh := range outShapes {
		t, err := ort.NewEmptyTensor[float32](sh)
		if err != nil {
			return fmt.Errorf("model %q: allocate output %q %v: %w", s.path, s.outNames[i], sh, err)
		}
		s.outputs = append(s.outputs, t)
		values[i] = t
		if roles[i] == RoleDepth || roles[i] == RoleScale || roles[i] == RoleEpistemic {
			h, w, _ := MapShape(sh)
			s.outMaps[i] = [2]int{h, w}
		}
	}
	s.nonFinite = make([]int, len(s.outputs))

	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	s.sha = sha
	providers := cfg.providers()
	var reasons []string
	for i, p := range providers {
		if err := ctx.Err(); err != nil {
			return err
		}
		sess, err := s.create(data, cfg, p, sha, ins, values)
		if err == nil {
			s.sess, s.provider = sess, p.Name
			return nil
		}
		reasons = append(reasons, fmt.Sprintf("%s: %v", p.Name, err))
		if i+1 < len(providers) {
			log.Warn("execution provider unavailable, falling back", "model", s.path,
				"provider", p.Name, "next", providers[i+1].Name, "reason", oneLine(err))
		}
	}
	return fmt.Errorf("model %q: no execution provider could run it (%s)", s.path, strings.Join(reasons, "; "))
}

// create builds the session for one provider. Provider initialization may
// install native signal handlers over Go's; they are restored afterwards.
func (s *Session) create(data []byte, cfg Config, p ProviderConfig, sha string, inputs, outputs []ort.Value) (*ort.AdvancedSession, error) {
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("session options: %w", err)
	}
	defer opts.Destroy()
	if err := s.setThreading(opts, cfg); err != nil {
		return nil, err
	}
	var sess *ort.AdvancedSession
	withSignalsPreserved(func() {
		if err = appendProvider(opts, p, sha, s.inShapes[0]); err != nil {
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
func (s *Session) setThreading(opts *ort.SessionOptions, cfg Config) error {
	spin := boolFlag(cfg.ThreadSpinning)
	for _, key := range []string{"session.intra_op.allow_spinning", "session.inter_op.allow_spinning"} {
		if err := opts.AddSessionConfigEntry(key, spin); err != nil {
			return fmt.Errorf("thread_spinning: %s: %w", key, err)
		}
	}
	if s.pools != nil {
		if err := s.pools.useGlobalPools(opts); err != nil {
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
		return ThreadPoolGlobal
	}
	return ThreadPoolSession
}

// Run executes the model on the current input tensor and scans the outputs
// for NaN and Inf. It allocates nothing.
func (s *Session) Run(ctx context.Context) (Frame, error) {
	if err := ctx.Err(); err != nil {
		return Frame{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == nil {
		return Frame{}, ErrClosed
	}
	if err := s.sess.Run(); err != nil {
		return Frame{}, fmt.Errorf("run model %q on %s: %w", s.path, s.provider, err)
	}
	valid := true
	var total int
	for i, t := range s.outputs {
		n := countNonFinite(t.GetData())
		s.nonFinite[i] = n
		total += n
	}
	s.frames.Add(1)
	if total > 0 {
		valid = false
		s.flagged.Add(1)
		s.nonFiniteValues.Add(uint64(total))
	}
	return Frame{NonFinite: s.nonFinite, Valid: valid}, nil
}

// countNonFinite counts NaN and ±Inf: v-v is 0 for finite v and NaN otherwise.
func countNonFinite(xs []float32) int {
	n := 0
	for _, v := range xs {
		if v-v != 0 {
			n++
		}
	}
	return n
}

// Input returns the first input tensor's backing slice (the image, or an
// AuxUE's features), in the spec's layout; fill it before Run.
func (s *Session) Input() []float32 { return s.inputs[0].GetData() }

// InputAt returns input i's backing slice: 0 the image (or features),
// 1 an AuxUE's depth input.
func (s *Session) InputAt(i int) []float32 { return s.inputs[i].GetData() }

// InputShape returns the first input's shape: (1,C,H,W) or (1,H,W,C).
func (s *Session) InputShape() []int64 { return s.inShapes[0] }

// Spec returns the IO spec the session was opened with.
func (s *Session) Spec() IOSpec { return s.spec }

// SHA256 is the model file's sha256 (hex).
func (s *Session) SHA256() string { return s.sha }

// Path is the model file.
func (s *Session) Path() string { return s.path }

// Output returns output i as the tensor's backing slice, valid until the
// next Run. Depth models: 0 = depth, then the features in spec order;
// AuxUEs: 0 = scale, 1 = epistemic, 2 = alpha when the spec names it.
func (s *Session) Output(i int) []float32 { return s.outputs[i].GetData() }

// OutputShape returns the shape of output i.
func (s *Session) OutputShape(i int) []int64 { return s.outputs[i].GetShape() }

// MapSize is the (width, height) of map output i (depth, scale,
// epistemic), whatever its rank (MapShape); 0, 0 for other outputs.
func (s *Session) MapSize(i int) (w, h int) { return s.outMaps[i][1], s.outMaps[i][0] }

// OutputNames lists the outputs in the order Output indexes them.
func (s *Session) OutputNames() []string { return s.outNames }

// Provider names the execution provider in use (for logs and metrics).
func (s *Session) Provider() string { return s.provider }

// Library reports the ONNX Runtime library in use.
func (s *Session) Library() Library { return s.lib }

// Stats returns the cumulative run counters.
func (s *Session) Stats() Stats {
	return Stats{Frames: s.frames.Load(), FlaggedFrames: s.flagged.Load(), NonFiniteValues: s.nonFiniteValues.Load()}
}

// SetImageRGB8 writes an interleaved RGB8 image (row stride in bytes) into
// the image input: x = p*range/255 - mean[c]) / std[c] in the spec's channel
// order (rgb or bgr), planar (NCHW) or interleaved (NHWC). The image must
// already have the spec's size.
func (s *Session) SetImageRGB8(pix []byte, width, height, stride int) error {
	in := s.spec.Input
	if s.spec.IsAuxUE() && !s.spec.OwnsInputs() {
		return fmt.Errorf("model %q: input %q is an AuxUE features input, not an image", s.path, in.Name)
	}
	if width != in.Width || height != in.Height {
		return fmt.Errorf("model %q: image is %dx%d, input %q wants %dx%d", s.path, width, height, in.Name, in.Width, in.Height)
	}
	if stride < 3*width || len(pix) < (height-1)*stride+3*width {
		return fmt.Errorf("model %q: image buffer of %d bytes (stride %d) is too small for %dx%d RGB", s.path, len(pix), stride, width, height)
	}
	dst := s.inputs[0].GetData()
	if s.spec.channels() == 1 {
		greyInto(s.pixels, pix, width, height, stride, dst)
		return nil
	}
	NormalizeRGB8(s.pixels, s.spec.Layout() == LayoutNHWC, pix, width, height, stride, dst)
	return nil
}

// greyInto writes the luma 0.299 R + 0.587 G + 0.114 B (ITU-R BT.601) of
// each pixel through channel 0 of t.
func greyInto(t PixelTransform, pix []byte, width, height, stride int, dst []float32) {
	for y := range height {
		row := pix[y*stride : y*stride+3*width]
		for x := range width {
			p := row[3*x : 3*x+3 : 3*x+3]
			l := 0.299*float32(p[0]) + 0.587*float32(p[1]) + 0.114*float32(p[2])
			dst[y*width+x] = l*t.Gain[0] + t.Offset[0]
		}
	}
}

// NormalizeRGB8 writes an interleaved RGB8 image into dst (3*width*height
// values) through the pixel transform t, planar or interleaved (nhwc).
func NormalizeRGB8(t PixelTransform, nhwc bool, pix []byte, width, height, stride int, dst []float32) {
	g0, g1, g2 := t.Gain[0], t.Gain[1], t.Gain[2]
	o0, o1, o2 := t.Offset[0], t.Offset[1], t.Offset[2]
	i0, i1, i2 := t.Order[0], t.Order[1], t.Order[2]
	plane := width * height
	for y := range height {
		row := pix[y*stride : y*stride+3*width]
		o := y * width
		for x := range width {
			p := row[3*x : 3*x+3 : 3*x+3]
			a := float32(p[i0])*g0 + o0
			b := float32(p[i1])*g1 + o1
			c := float32(p[i2])*g2 + o2
			if nhwc {
				d := dst[3*(o+x) : 3*(o+x)+3 : 3*(o+x)+3]
				d[0], d[1], d[2] = a, b, c
			} else {
				dst[o+x], dst[plane+o+x], dst[2*plane+o+x] = a, b, c
			}
		}
	}
}

// DepthInto reads the depth output of the last Run into dst (len(dst) =
// the depth map's size). Metric meanings give metres: values that are
// NaN, Inf or not positive after conversion are written as 0 (no depth)
// and counted. A relative model gives its relative inverse depth times
// scale; only non-finite values count as invalid (written 0).
func (s *Session) DepthInto(dst []float32) (invalid int, err error) {
	if s.spec.IsAuxUE() {
		return 0, fmt.Errorf("model %q: an AuxUE has no depth output", s.path)
	}
	src := s.outputs[0].GetData()
	if len(dst) != len(src) {
		return 0, fmt.Errorf("model %q: depth buffer has %d values, output %q has %d", s.path, len(dst), s.outNames[0], len(src))
	}
	k := s.spec.scale()
	switch s.spec.Depth.Meaning {
	case MeaningRelative:
		for i, v := range src {
			d := v * k
			if d-d != 0 {
				d = 0
				invalid++
			}
			dst[i] = d
		}
		return invalid, nil
	case MeaningMetricDepth:
		for i, v := range src {
			d := v * k
			if d-d != 0 || d <= 0 {
				d = 0
				invalid++
			}
			dst[i] = d
		}
		return invalid, nil
	}
	for i, v := range src {
		d := k / v
		if d-d != 0 || d <= 0 {
			d = 0
			invalid++
		}
		dst[i] = d
	}
	return invalid, nil
}

// Close releases the session, its tensors and its reference on the ONNX
// Runtime environment. It is safe to call more than once.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.sess != nil {
		errs = append(errs, s.sess.Destroy())
		s.sess = nil
	}
	for _, t := range s.outputs {
		errs = append(errs, t.Destroy())
	}
	s.outputs = nil
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
