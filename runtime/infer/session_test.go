package infer

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gorgonia.org/tensor"

	"github.com/didoedge/didoedge/pkg/nn"
	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// affineModel is depth = x * a + c on channel 0 of a (1,C,H,W) input
// "image" (a (1,1,H,W) map), with an extra output "feat" = Relu(x) of every
// channel for feature plumbing.
func affineModel(c, h, w int, a, b float32) *onnx.Model {
	bl := onnx.NewBuilder("affine")
	x := bl.Input("image", 1, int64(c), int64(h), int64(w))
	x0 := bl.Op("Slice", []string{x, bl.ConstInt64("starts", []int64{1}, []int64{0}),
		bl.ConstInt64("ends", []int64{1}, []int64{1}), bl.ConstInt64("axes", []int64{1}, []int64{1})})
	y := bl.Op("Mul", []string{x0, bl.Const("a", nil, []float32{a})})
	y = bl.Op("Add", []string{y, bl.Const("b", nil, []float32{b})})
	f := bl.Op("Relu", []string{x})
	bl.Rename(y, "depth")
	bl.Rename(f, "feat")
	bl.OutputShaped("depth", 1, 1, int64(h), int64(w))
	bl.Output("feat", 4) // dims left unknown: the session learns them by a probe run
	return bl.Model()
}

// sqrtModel is depth = Sqrt(x): NaN wherever x < 0.
func sqrtModel(h, w int) *onnx.Model {
	bl := onnx.NewBuilder("sqrt")
	x := bl.Input("image", 1, 1, int64(h), int64(w))
	bl.Rename(bl.Op("Sqrt", []string{x}), "depth")
	bl.OutputShaped("depth", 1, 1, int64(h), int64(w))
	return bl.Model()
}

func saveModel(t testing.TB, m *onnx.Model) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "model.onnx")
	if err := onnx.WriteFile(p, m); err != nil {
		t.Fatal(err)
	}
	return p
}

func spec(c, h, w int, meaning string, features ...string) IOSpec {
	s := IOSpec{
		Input: InputSpec{Name: "image", Layout: "NCHW", Channels: c, Height: h, Width: w},
		Depth: OutputSpec{Name: "depth", Meaning: meaning},
	}
	for _, f := range features {
		s.Features = append(s.Features, FeatureSpec{Name: f})
	}
	return s
}

func newSession(t testing.TB, path string, s IOSpec, cfg onnxrt.Config, log *slog.Logger) *Session {
	t.Helper()
	sess, err := NewSession(context.Background(), path, s, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sess.Close(); err != nil {
			t.Error(err)
		}
	})
	return sess
}

func TestRunMatchesClosedForm(t *testing.T) {
	path := saveModel(t, affineModel(3, 3, 4, 2, 0.5))
	sess := newSession(t, path, spec(3, 3, 4, MeaningMetricDepth, "feat"), onnxrt.Config{}, nil)
	if sess.Provider() != onnxrt.ProviderCPU {
		t.Fatalf("provider %q", sess.Provider())
	}
	in := sess.Input()
	for i := range in {
		in[i] = float32(i) - 10
	}
	fr, err := sess.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !fr.Valid || fr.NonFinite[0] != 0 || fr.NonFinite[1] != 0 {
		t.Fatalf("frame %+v", fr)
	}
	if got := sess.OutputShape(1); len(got) != 4 || got[1] != 3 || got[3] != 4 {
		t.Fatalf("probed feature shape %v", got)
	}
	for i, x := range in {
		if f := sess.Output(1)[i]; f != max(x, 0) {
			t.Fatalf("element %d: feat %g for x %g", i, f, x)
		}
		if i < 12 { // channel 0 of the 3x4 input
			if d := sess.Output(0)[i]; d != 2*x+0.5 {
				t.Fatalf("element %d: depth %g for x %g", i, d, x)
			}
		}
	}
	if w, h := sess.MapSize(0); w != 4 || h != 3 {
		t.Fatalf("depth map %dx%d, want 4x3", w, h)
	}
	if st := sess.Stats(); st.Frames != 1 || st.FlaggedFrames != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestDynamicShapesProbed: a model with symbolic H and W gets its output
// shapes from one probe run at the spec's size.
func TestDynamicShapesProbed(t *testing.T) {
	bl := onnx.NewBuilder("dyn")
	x := bl.Input("image", -1, 3, -1, -1)
	bl.Rename(bl.Op("ReduceMean", []string{x}, onnx.IntsAttr("axes", 1), onnx.IntAttr("keepdims", 0)), "depth")
	bl.Output("depth", 3)
	sess := newSession(t, saveModel(t, bl.Model()), spec(3, 5, 7, MeaningMetricDepth), onnxrt.Config{}, nil)
	if got := sess.OutputShape(0); len(got) != 3 || got[0] != 1 || got[1] != 5 || got[2] != 7 {
		t.Fatalf("output shape %v, want [1 5 7]", got)
	}
	if w, h := sess.MapSize(0); w != 7 || h != 5 {
		t.Fatalf("map %dx%d, want 7x5 from the rank-3 output", w, h)
	}
	for i := range sess.Input() {
		sess.Input()[i] = float32(i)
	}
	if _, err := sess.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// mean over the 3 channels of i, i+35, i+70 is i+35.
	if out := sess.Output(0); out[34] != 69 {
		t.Fatalf("out[34] = %g, want 69", out[34])
	}
}

func TestNonFiniteOutputsAreFlagged(t *testing.T) {
	sess := newSession(t, saveModel(t, sqrtModel(4, 5)), spec(1, 4, 5, MeaningMetricDepth), onnxrt.Config{}, nil)
	in := sess.Input()
	negatives := 0
	for i := range in {
		in[i] = float32(i%7) - 2 // -2, -1 are negative -> NaN
		if in[i] < 0 {
			negatives++
		}
	}
	fr, err := sess.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if fr.Valid || fr.NonFinite[0] != negatives {
		t.Fatalf("frame %+v, want invalid with %d non-finite", fr, negatives)
	}
	depth := make([]float32, len(in))
	invalid, err := sess.DepthInto(depth)
	if err != nil {
		t.Fatal(err)
	}
	// Sqrt(0) = 0 is not a valid depth either.
	zeros := 0
	for _, v := range in {
		if v == 0 {
			zeros++
		}
	}
	if invalid != negatives+zeros {
		t.Fatalf("DepthInto marked %d invalid, want %d", invalid, negatives+zeros)
	}
	for i, v := range depth {
		if math.IsNaN(float64(v)) || (in[i] <= 0 && v != 0) {
			t.Fatalf("depth[%d] = %g for input %g", i, v, in[i])
		}
	}
	if st := sess.Stats(); st.FlaggedFrames != 1 || st.NonFiniteValues != uint64(negatives) {
		t.Fatalf("stats %+v", st)
	}
}

func TestDepthConversion(t *testing.T) {
	tests := []struct {
		meaning string
		scale   float32
		value   float32 // model output (x*1+0)
		want    float32
	}{
		{MeaningMetricDepth, 0, 7, 7},
		{MeaningMetricDepth, 2, 7, 14},
		{MeaningDisparity, 0, 4, 0.25},
		{MeaningDisparity, 100, 4, 25},
		{MeaningInverseDepth, 1, 0.5, 2},
		{MeaningInverseDepth, 1, 0, 0},   // infinite depth: invalid
		{MeaningDisparity, 1, -3, 0},     // negative disparity: invalid
		{MeaningMetricDepth, 1, -1.5, 0}, // negative depth: invalid
	}
	path := saveModel(t, affineModel(1, 1, 1, 1, 0))
	for _, tc := range tests {
		s := spec(1, 1, 1, tc.meaning, "feat")
		s.Depth.Scale = tc.scale
		sess := newSession(t, path, s, onnxrt.Config{}, nil)
		sess.Input()[0] = tc.value
		if _, err := sess.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		var d [1]float32
		invalid, err := sess.DepthInto(d[:])
		if err != nil {
			t.Fatal(err)
		}
		if d[0] != tc.want || (invalid == 1) != (tc.want == 0) {
			t.Errorf("%s scale %g value %g: depth %g (invalid %d), want %g", tc.meaning, tc.scale, tc.value, d[0], invalid, tc.want)
		}
	}
}

func TestSetImageRGB8(t *testing.T) {
	s := spec(3, 2, 3, MeaningMetricDepth, "feat")
	s.Input.Mean = []float32{0.5, 0.25, 0}
	s.Input.Std = []float32{0.5, 0.25, 2}
	sess := newSession(t, saveModel(t, affineModel(3, 2, 3, 1, 0)), s, onnxrt.Config{}, nil)
	stride := 3*3 + 2 // padded rows
	pix := make([]byte, 2*stride)
	for y := range 2 {
		for x := range 3 {
			for c := range 3 {
				pix[y*stride+3*x+c] = byte(40*y + 10*x + 3*c)
			}
		}
	}
	if err := sess.SetImageRGB8(pix, 3, 2, stride); err != nil {
		t.Fatal(err)
	}
	in := sess.Input()
	for c := range 3 {
		for y := range 2 {
			for x := range 3 {
				p := float64(pix[y*stride+3*x+c]) / 255
				want := (p - float64(s.Input.Mean[c])) / float64(s.Input.Std[c])
				if got := in[c*6+y*3+x]; math.Abs(float64(got)-want) > 1e-6 {
					t.Fatalf("c%d y%d x%d: %g, want %g", c, y, x, got, want)
				}
			}
		}
	}
	if err := sess.SetImageRGB8(pix, 4, 2, stride); err == nil || !strings.Contains(err.Error(), "wants 3x2") {
		t.Fatalf("wrong size: err = %v", err)
	}
	if err := sess.SetImageRGB8(pix[:10], 3, 2, stride); err == nil {
		t.Fatal("short buffer accepted")
	}
}

// TestRunAllocatesNothing is the zero-allocation contract of the frame path.
func TestRunAllocatesNothing(t *testing.T) {
	sess := newSession(t, saveModel(t, affineModel(3, 8, 8, 2, 1)), spec(3, 8, 8, MeaningDisparity, "feat"), onnxrt.Config{}, nil)
	depth := make([]float32, 8*8)
	pix := make([]byte, 8*8*3)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(50, func() {
		if err := sess.SetImageRGB8(pix, 8, 8, 24); err != nil {
			t.Fatal(err)
		}
		if _, err := sess.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := sess.DepthInto(depth); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("SetImageRGB8 + Run + DepthInto allocate %v times per frame, want 0", allocs)
	}
}

func TestSpecMismatchListsBoth(t *testing.T) {
	path := saveModel(t, affineModel(3, 4, 4, 1, 0))
	tests := []struct {
		name string
		spec IOSpec
		want []string
	}{
		{"wrong input name", func() IOSpec { s := spec(3, 4, 4, MeaningMetricDepth); s.Input.Name = "rgb"; return s }(),
			[]string{`input: the model has no input "rgb"`, `the model's input "image" is not fed by the spec`,
				"spec:  inputs [rgb NCHW [1 3 4 4]]", "model: inputs [image float32 [1 3 4 4]]", "outputs [depth", "feat"}},
		{"wrong size", spec(3, 8, 4, MeaningMetricDepth), []string{`input: input "image" has shape [1 3 4 4], the spec gives NCHW [1 3 8 4]`}},
		{"missing feature", spec(3, 4, 4, MeaningMetricDepth, "enc4"), []string{`features: the model has no output "enc4"`,
			"spec:  inputs [image NCHW [1 3 4 4]]; outputs [depth=depth, features=enc4]"}},
		{"nhwc spec, nchw model", func() IOSpec { s := spec(3, 4, 4, MeaningMetricDepth); s.Input.Layout = LayoutNHWC; return s }(),
			[]string{`the spec gives NHWC [1 4 4 3]`}},
		{"features as depth", func() IOSpec { s := spec(3, 4, 4, MeaningMetricDepth); s.Depth.Name = "feat"; return s }(),
			[]string{`depth: output "feat": shape [1 3 4 4] is not one map`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSession(context.Background(), path, tc.spec, onnxrt.Config{}, nil)
			if err == nil {
				t.Fatal("mismatch accepted")
			}
			for _, w := range append(tc.want, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestCorruptModelNamesFile(t *testing.T) {
	valid := affineModel(1, 2, 2, 1, 0).Marshal()
	dir := t.TempDir()
	tests := map[string][]byte{
		"garbage.onnx":   []byte("definitely not a protobuf \x00\x01\x02"),
		"truncated.onnx": valid[:len(valid)/2],
		"empty.onnx":     {},
	}
	for name, data := range tests {
		p := filepath.Join(dir, name)
		os.WriteFile(p, data, 0o644)
		_, err := NewSession(context.Background(), p, spec(1, 2, 2, MeaningMetricDepth), onnxrt.Config{}, nil)
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: err = %v, want it to name the file", name, err)
		}
	}
	if _, err := NewSession(context.Background(), filepath.Join(dir, "absent.onnx"), spec(1, 2, 2, MeaningMetricDepth), onnxrt.Config{}, nil); err == nil || !strings.Contains(err.Error(), "absent.onnx") {
		t.Errorf("missing file: err = %v", err)
	}
}

// TestProviderFallback is a CPU test of the fallback: on a machine without
// an NVIDIA GPU (or without CUDA 13 / TensorRT 10) both GPU providers must
// fail, each with one WARN line, and the CPU must run. It tests no GPU
// (gpu_test.go does, where there is one) and skips where one could work.
func TestProviderFallback(t *testing.T) {
	skipWithGPU(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := onnxrt.Config{Providers: []onnxrt.ProviderConfig{
		{Name: onnxrt.ProviderTensorRT, FP16: true, EngineCacheDir: t.TempDir(), WorkspaceBytes: 1 << 30},
		{Name: onnxrt.ProviderCUDA, DeviceID: 0},
		{Name: onnxrt.ProviderCPU},
	}}
	sess := newSession(t, saveModel(t, affineModel(1, 2, 2, 3, 0)), spec(1, 2, 2, MeaningMetricDepth), cfg, log)
	if sess.Provider() != onnxrt.ProviderCPU {
		t.Fatalf("provider %q, want cpu on a machine without GPU libraries", sess.Provider())
	}
	var lines []string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("want 2 warnings (tensorrt, cuda), got %d:\n%s", len(lines), logs.String())
	}
	for i, want := range []string{"provider=tensorrt next=cuda", "provider=cuda next=cpu"} {
		if !strings.Contains(lines[i], "level=WARN") || !strings.Contains(lines[i], want) || !strings.Contains(lines[i], "reason=") {
			t.Errorf("line %d = %q, want a WARN with %q and a reason", i, lines[i], want)
		}
	}
	sess.Input()[0] = 2
	if _, err := sess.Run(context.Background()); err != nil || sess.Output(0)[0] != 6 {
		t.Fatalf("cpu fallback run: %v, %g", err, sess.Output(0)[0])
	}

	_, err := NewSession(context.Background(), saveModel(t, affineModel(1, 2, 2, 3, 0)), spec(1, 2, 2, MeaningMetricDepth),
		onnxrt.Config{Providers: []onnxrt.ProviderConfig{{Name: onnxrt.ProviderCUDA}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "no execution provider could run it (cuda: ") {
		t.Fatalf("GPU only: err = %v", err)
	}
}

// TestSIGINTReachesGoAfterSession: a signal.Notify channel still gets SIGINT
// after sessions were created (providers may replace native handlers).
func TestSIGINTReachesGoAfterSession(t *testing.T) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt)
	defer signal.Stop(ch)
	cfg := onnxrt.Config{Providers: []onnxrt.ProviderConfig{{Name: onnxrt.ProviderCUDA}, {Name: onnxrt.ProviderCPU}}}
	newSession(t, saveModel(t, affineModel(1, 2, 2, 1, 0)), spec(1, 2, 2, MeaningMetricDepth), cfg, nil)
	expectSignal(t, ch)
}

func expectSignal(t *testing.T, ch chan os.Signal) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-ch:
		if s != os.Interrupt {
			t.Fatalf("got %v", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SIGINT did not reach the Go signal channel")
	}
}

func TestRunHonoursCancelledContext(t *testing.T) {
	sess := newSession(t, saveModel(t, affineModel(1, 2, 2, 1, 0)), spec(1, 2, 2, MeaningMetricDepth), onnxrt.Config{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sess.Run(ctx); err != context.Canceled {
		t.Fatalf("err = %v", err)
	}
}

// BenchmarkRun measures the steady-state frame path on the CPU provider with
// the TinyUNet depth net at 192x640 (base 16 channels, ~4.1 GFLOP):
// frame = SetImageRGB8 + Run (+ NaN scan) + DepthInto; run = Run alone;
// go_forward = the same network's pkg/nn forward pass, for the ratio.
func BenchmarkRun(b *testing.B) {
	u, err := onnx.NewTinyUNet(16, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		b.Fatal(err)
	}
	m, err := u.Export([]int64{1, 3, 192, 640})
	if err != nil {
		b.Fatal(err)
	}
	sess := newSession(b, saveModel(b, m), spec(3, 192, 640, MeaningMetricDepth, "features"), onnxrt.Config{}, nil)
	pix := make([]byte, 192*640*3)
	for i := range pix {
		pix[i] = byte(i * 7)
	}
	depth := make([]float32, 192*640)
	ctx := context.Background()
	b.Run("frame", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := sess.SetImageRGB8(pix, 640, 192, 640*3); err != nil {
				b.Fatal(err)
			}
			fr, err := sess.Run(ctx)
			if err != nil || !fr.Valid {
				b.Fatalf("run: %v %+v", err, fr)
			}
			if _, err := sess.DepthInto(depth); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("run", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sess.Run(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("go_forward", func(b *testing.B) {
		x := onnxInput(sess)
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := u.Forward(x); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// onnxInput copies the session's current input into an nn tensor.
func onnxInput(s *Session) *tensor.Dense {
	sh := s.InputShape()
	x := nn.NewDense(int(sh[0]), int(sh[1]), int(sh[2]), int(sh[3]))
	copy(nn.Data(x), s.Input())
	return x
}

func TestEnvironmentRefcount(t *testing.T) {
	path := saveModel(t, affineModel(1, 2, 2, 1, 0))
	a, err := NewSession(context.Background(), path, spec(1, 2, 2, MeaningMetricDepth), onnxrt.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSession(context.Background(), path, spec(1, 2, 2, MeaningMetricDepth), onnxrt.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := onnxrt.Acquire("/some/other/libonnxruntime.so.1"); err == nil || !strings.Contains(err.Error(), "already loaded") {
		t.Fatalf("second library: err = %v", err)
	}
	a.Close()
	if _, err := b.Run(context.Background()); err != nil {
		t.Fatalf("b after a.Close: %v", err)
	}
	b.Close()
	b.Close()
	if _, err := b.Run(context.Background()); err != ErrClosed {
		t.Fatalf("run after close: %v", err)
	}
	refs := onnxrt.EnvironmentRefs()
	if refs != 0 {
		t.Fatalf("refs = %d after closing both sessions", refs)
	}
	// The environment comes back for the next session.
	c := newSession(t, path, spec(1, 2, 2, MeaningMetricDepth), onnxrt.Config{}, nil)
	if _, err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}
