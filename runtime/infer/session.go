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
	input     *ort.Tensor[float32]
	inShape   ort.Shape
	outputs   []*ort.Tensor[float32]
	outNames  []string
	nonFinite []int
	release   func() error

	frames, flagged, nonFiniteValues atomic.Uint64
}

// Frame reports the health of one Run's outputs.
type Frame struct {
	// NonFinite counts NaN and ±Inf values per output, depth first then the
	// features in spec order. The slice is reused by the next Run.
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
	lib, release, err := Acquire(cfg.Library)
	if err != nil {
		return nil, err
	}
	s := &Session{path: path, spec: spec, lib: lib, release: release}
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
	inShape, outShapes, err := matchSpec(s.spec, inputs, outputs)
	if err != nil {
		return fmt.Errorf("model %q does not match its io spec: %w", s.path, err)
	}
	s.inShape = inShape
	s.outNames = s.spec.outputNames()
	if needsProbe(outShapes) {
		if outShapes, err = probeOutputShapes(data, s.spec.Input.Name, inShape, s.outNames); err != nil {
			return fmt.Errorf("model %q: %w", s.path, err)
		}
	}
	if s.input, err = ort.NewEmptyTensor[float32](inShape); err != nil {
		return fmt.Errorf("model %q: allocate input %v: %w", s.path, inShape, err)
	}
	values := make([]ort.Value, len(outShapes))
	for i, sh := range outShapes {
		t, err := ort.NewEmptyTensor[float32](sh)
		if err != nil {
			return fmt.Errorf("model %q: allocate output %q %v: %w", s.path, s.outNames[i], sh, err)
		}
		s.outputs = append(s.outputs, t)
		values[i] = t
	}
	s.nonFinite = make([]int, len(s.outputs))

	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	providers := cfg.providers()
	var reasons []string
	for i, p := range providers {
		if err := ctx.Err(); err != nil {
			return err
		}
		sess, err := s.create(data, cfg, p, sha, values)
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
func (s *Session) create(data []byte, cfg Config, p ProviderConfig, sha string, outputs []ort.Value) (*ort.AdvancedSession, error) {
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("session options: %w", err)
	}
	defer opts.Destroy()
	if cfg.IntraOpThreads > 0 {
		if err := opts.SetIntraOpNumThreads(cfg.IntraOpThreads); err != nil {
			return nil, fmt.Errorf("intra_op_threads: %w", err)
		}
	}
	var sess *ort.AdvancedSession
	withSignalsPreserved(func() {
		if err = appendProvider(opts, p, sha, s.inShape); err != nil {
			return
		}
		sess, err = ort.NewAdvancedSessionWithONNXData(data, []string{s.spec.Input.Name}, s.outNames,
			[]ort.Value{s.input}, outputs, opts)
	})
	return sess, err
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

// Input returns the input tensor's NCHW backing slice; fill it before Run.
func (s *Session) Input() []float32 { return s.input.GetData() }

// InputShape returns the input tensor's shape (1, C, H, W).
func (s *Session) InputShape() []int64 { return s.inShape }

// Output returns output i (0 = depth, then features in spec order) as the
// tensor's backing slice, valid until the next Run.
func (s *Session) Output(i int) []float32 { return s.outputs[i].GetData() }

// OutputShape returns the shape of output i.
func (s *Session) OutputShape(i int) []int64 { return s.outputs[i].GetShape() }

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
// the input tensor as normalized NCHW planes: (p/255 - mean[c]) / std[c]. The
// image must already have the spec's size.
func (s *Session) SetImageRGB8(pix []byte, width, height, stride int) error {
	in := s.spec.Input
	if s.spec.channels() != 3 {
		return fmt.Errorf("model %q: SetImageRGB8 needs a 3-channel input, spec has %d", s.path, s.spec.channels())
	}
	if width != in.Width || height != in.Height {
		return fmt.Errorf("model %q: image is %dx%d, input %q wants %dx%d", s.path, width, height, in.Name, in.Width, in.Height)
	}
	if stride < 3*width || len(pix) < (height-1)*stride+3*width {
		return fmt.Errorf("model %q: image buffer of %d bytes (stride %d) is too small for %dx%d RGB", s.path, len(pix), stride, width, height)
	}
	var scale, shift [3]float32
	for c := range 3 {
		mean, std := float32(0), float32(1)
		if len(in.Mean) == 3 {
			mean = in.Mean[c]
		}
		if len(in.Std) == 3 {
			std = in.Std[c]
		}
		scale[c] = 1 / (255 * std)
		shift[c] = -mean / std
	}
	dst := s.input.GetData()
	plane := width * height
	r, g, b := dst[:plane], dst[plane:2*plane], dst[2*plane:3*plane]
	for y := range height {
		row := pix[y*stride : y*stride+3*width]
		o := y * width
		for x := range width {
			p := row[3*x : 3*x+3 : 3*x+3]
			r[o+x] = float32(p[0])*scale[0] + shift[0]
			g[o+x] = float32(p[1])*scale[1] + shift[1]
			b[o+x] = float32(p[2])*scale[2] + shift[2]
		}
	}
	return nil
}

// DepthInto converts the depth output of the last Run to metres in dst
// (len(dst) = the depth output's element count). Values that are NaN, Inf,
// or not positive after conversion are written as 0 (no depth) and counted.
func (s *Session) DepthInto(dst []float32) (invalid int, err error) {
	src := s.outputs[0].GetData()
	if len(dst) != len(src) {
		return 0, fmt.Errorf("model %q: depth buffer has %d values, output %q has %d", s.path, len(dst), s.outNames[0], len(src))
	}
	k := s.spec.scale()
	inverse := s.spec.Depth.Meaning != MeaningMetricDepth
	for i, v := range src {
		d := v * k
		if inverse {
			d = k / v
		}
		if d-d != 0 || d <= 0 {
			dst[i] = 0
			invalid++
			continue
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
	if s.input != nil {
		errs = append(errs, s.input.Destroy())
		s.input = nil
	}
	if s.release != nil {
		errs = append(errs, s.release())
		s.release = nil
	}
	return errors.Join(errs...)
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
