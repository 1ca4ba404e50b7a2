package infer

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// requirePlacement skips where the library cannot report ONNX Runtime's
// node placement (older than 1.29.0, e.g. a 1.24.1 ONNXRUNTIME_LIB).
func requirePlacement(t *testing.T) {
	t.Helper()
	lib, err := onnxrt.ResolveLibrary("")
	if err != nil {
		t.Fatal(err)
	}
	if !onnxrt.RecordsPlacement(lib) {
		t.Skipf("ONNX Runtime %s (%s) cannot report the node placement; it needs >= %s (bash scripts/deps.sh)", lib.Version, lib.Path, onnxrt.AssignmentMinVersion)
	}
}

// TestPlacementIsONNXRuntimes: the placement is ONNX Runtime's own record
// (Session_GetEpGraphAssignmentInfo, OrtApi 407-412): the affine model's
// four nodes (Slice, Mul, Add, Relu) all on the CPU provider, for the
// one-frame session and for the dynamic-batch one (IoBinding path). A wrong
// OrtApi index could not give these names and counts.
func TestPlacementIsONNXRuntimes(t *testing.T) {
	requirePlacement(t)
	want := onnxrt.Placement{{Provider: "CPUExecutionProvider", Nodes: 4, Ops: map[string]int{"Slice": 1, "Mul": 1, "Add": 1, "Relu": 1}}}
	check := func(name string, got onnxrt.Placement) {
		t.Helper()
		if len(got) != 1 || got[0].Provider != want[0].Provider || got[0].Nodes != want[0].Nodes || !maps.Equal(got[0].Ops, want[0].Ops) {
			t.Fatalf("%s: placement %+v, want %+v", name, got, want)
		}
		if got.String() != "CPUExecutionProvider 4" || got.Main() != "CPUExecutionProvider" {
			t.Fatalf("%s: String %q, Main %q", name, got.String(), got.Main())
		}
	}
	path := saveModel(t, affineModel(1, 2, 2, 3, 0))
	s := newSession(t, path, spec(1, 2, 2, MeaningMetricDepth), onnxrt.Config{}, nil)
	check("one frame", s.Placement())

	m := affineModel(1, 2, 2, 3, 0)
	if _, err := onnx.DynamicBatch(m, ""); err != nil {
		t.Fatal(err)
	}
	d, err := OpenSession(context.Background(), saveModel(t, m), spec(1, 2, 2, MeaningMetricDepth), onnxrt.Config{}, SessionOptions{MaxBatch: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.MaxBatch() != 3 {
		t.Fatalf("MaxBatch %d", d.MaxBatch())
	}
	check("batch 3", d.Placement())
}

// TestPlacementString: providers in ONNX Runtime's order with their node
// counts, the operator types of every provider but the main one, sorted.
func TestPlacementString(t *testing.T) {
	pl := onnxrt.Placement{
		{Provider: "CUDAExecutionProvider", Nodes: 58, Ops: map[string]int{"Conv": 40, "Relu": 18}},
		{Provider: "CPUExecutionProvider", Nodes: 3, Ops: map[string]int{"Shape": 2, "Gather": 1}},
	}
	if got, want := pl.String(), "CUDAExecutionProvider 58, CPUExecutionProvider 3 (Gather 1, Shape 2)"; got != want {
		t.Fatalf("String %q, want %q", got, want)
	}
	if pl.Nodes("CPUExecutionProvider") != 3 || pl.Nodes("TensorrtExecutionProvider") != 0 || pl.Main() != "CUDAExecutionProvider" {
		t.Fatalf("Nodes/Main wrong: %d %d %q", pl.Nodes("CPUExecutionProvider"), pl.Nodes("TensorrtExecutionProvider"), pl.Main())
	}
	if onnxrt.Placement(nil).String() != "unknown" {
		t.Fatal("nil placement")
	}
}

// TestRequiredProvider: a required GPU provider that cannot load fails the
// start with an error naming the key and the reason (CPU test: no NVIDIA
// GPU here); a required CPU runs; providers listed after a required one
// are refused by Validate; a required GPU provider that ONNX Runtime gave
// no node fails too (a synthetic placement: no GPU to produce a real one).
func TestRequiredProvider(t *testing.T) {
	path := saveModel(t, affineModel(1, 2, 2, 3, 0))
	t.Run("cuda required, no GPU", func(t *testing.T) {
		skipWithGPU(t)
		_, err := NewSession(context.Background(), path, spec(1, 2, 2, MeaningMetricDepth),
			onnxrt.Config{Providers: []onnxrt.ProviderConfig{{Name: onnxrt.ProviderCUDA, Required: true}}}, nil)
		if err == nil {
			t.Fatal("a required cuda provider without a GPU was accepted")
		}
		for _, want := range []string{"inference.providers[0].required", "cuda is required", path, "cuda: "} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	})
	t.Run("cpu required", func(t *testing.T) {
		s := newSession(t, path, spec(1, 2, 2, MeaningMetricDepth), onnxrt.Config{Providers: []onnxrt.ProviderConfig{{Name: onnxrt.ProviderCPU, Required: true}}}, nil)
		if s.Provider() != onnxrt.ProviderCPU {
			t.Fatalf("provider %q", s.Provider())
		}
	})
	t.Run("listed after a required one", func(t *testing.T) {
		err := onnxrt.Config{Providers: []onnxrt.ProviderConfig{{Name: onnxrt.ProviderCUDA, Required: true}, {Name: onnxrt.ProviderCPU}}}.Validate()
		if err == nil || !strings.Contains(err.Error(), "providers[1]: cpu is listed after providers[0] (cuda), which is required") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("registered but no node", func(t *testing.T) {
		s := &Session{path: "m.onnx", placement: onnxrt.Placement{{Provider: "CPUExecutionProvider", Nodes: 4}}}
		err := s.checkRequired(0, onnxrt.ProviderConfig{Name: onnxrt.ProviderCUDA, Required: true})
		if err == nil || !strings.Contains(err.Error(), "assigned no node") || !strings.Contains(err.Error(), "CUDAExecutionProvider") {
			t.Fatalf("err = %v", err)
		}
		s.placement = onnxrt.Placement{{Provider: "CUDAExecutionProvider", Nodes: 3}, {Provider: "CPUExecutionProvider", Nodes: 1}}
		if err := s.checkRequired(0, onnxrt.ProviderConfig{Name: onnxrt.ProviderCUDA, Required: true}); err != nil {
			t.Fatal(err)
		}
		if err := s.checkRequired(0, onnxrt.ProviderConfig{Name: onnxrt.ProviderCUDA}); err != nil {
			t.Fatalf("not required: %v", err)
		}
	})
}

// TestNextProvider: a failed session moves down the list, stays on a
// required provider, and stays on the last one.
func TestNextProvider(t *testing.T) {
	all := []onnxrt.ProviderConfig{{Name: onnxrt.ProviderTensorRT}, {Name: onnxrt.ProviderCUDA}, {Name: onnxrt.ProviderCPU}}
	req := []onnxrt.ProviderConfig{{Name: onnxrt.ProviderTensorRT}, {Name: onnxrt.ProviderCUDA, Required: true}}
	for _, tc := range []struct {
		name string
		ps   []onnxrt.ProviderConfig
		cur  int
		want int
	}{
		{"tensorrt -> cuda", all, 0, 1},
		{"cuda -> cpu", all, 1, 2},
		{"cpu stays", all, 2, 2},
		{"tensorrt -> required cuda", req, 0, 1},
		{"required cuda stays", req, 1, 1},
		{"single", []onnxrt.ProviderConfig{{Name: onnxrt.ProviderCPU}}, 0, 0},
	} {
		if got := nextProvider(tc.ps, tc.cur); got != tc.want {
			t.Errorf("%s: nextProvider = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestRunFaultPolicy injects run failures inside ONNX Runtime (a run with
// its terminate flag set fails there, as a provider error would): one
// failure is absorbed by the retry; two make the frame fail with one
// *ModelFault naming the model, the provider, ONNX Runtime's reason and
// the rebuild, after which the rebuilt session (same tensors) computes the
// closed form again. One-frame and dynamic-batch sessions.
func TestRunFaultPolicy(t *testing.T) {
	for _, batched := range []bool{false, true} {
		name := map[bool]string{false: "one frame", true: "batch 2"}[batched]
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			m := affineModel(1, 2, 2, 3, 1)
			so := SessionOptions{}
			n := 1
			if batched {
				if _, err := onnx.DynamicBatch(m, ""); err != nil {
					t.Fatal(err)
				}
				so.MaxBatch, n = 2, 2
			}
			path := saveModel(t, m)
			s, err := OpenSession(context.Background(), path, spec(1, 2, 2, MeaningMetricDepth), onnxrt.Config{}, so, log)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			run := func(x float32) error {
				for k := range n {
					for i := range s.InputSlot(0, k) {
						s.InputSlot(0, k)[i] = x + float32(i+k)
					}
				}
				_, err := s.RunBatch(ctx, n)
				if err != nil {
					return err
				}
				for k := range n {
					for i, v := range s.OutputSlot(0, k) {
						if want := 3*(x+float32(i+k)) + 1; v != want {
							t.Fatalf("frame %d value %d = %g, want 3x+1 = %g", k, i, v, want)
						}
					}
				}
				return nil
			}
			if err := run(1); err != nil {
				t.Fatal(err)
			}
			s.injectRunFailures(1)
			if err := run(2); err != nil {
				t.Fatalf("one failure, the retry should succeed: %v", err)
			}
			if f := s.Faults(); f != (FaultStats{RunFaults: 1, Recovered: 1}) {
				t.Fatalf("faults %+v after a recovered retry", f)
			}
			s.injectRunFailures(2)
			err = run(3)
			var mf *ModelFault
			if !errors.As(err, &mf) {
				t.Fatalf("two failures: err = %v (%T), want a *ModelFault", err, err)
			}
			if mf.Model != "depth" || mf.Path != path || mf.Provider != onnxrt.ProviderCPU || mf.Kind != FaultRun ||
				!strings.Contains(mf.Err.Error(), "terminate flag") || mf.Action != "retried once, then rebuilt the session on cpu" {
				t.Fatalf("fault %+v", mf)
			}
			for _, want := range []string{"model fault: depth model", path, "on cpu: run:", "terminate flag", "rebuilt the session on cpu"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if f := s.Faults(); f != (FaultStats{RunFaults: 2, Recovered: 1, Rebuilds: 1}) {
				t.Fatalf("faults %+v after a rebuild", f)
			}
			if err := run(4); err != nil {
				t.Fatalf("the rebuilt session: %v", err)
			}
			s.injectRunFailures(2)
			if err := run(5); err == nil {
				t.Fatal("second fault not reported")
			}
			// Rate-limited: the second fault within the interval is
			// counted, not logged.
			if c := strings.Count(logs.String(), `msg="model fault"`); c != 1 {
				t.Fatalf("%d model fault log lines, want 1 (rate-limited):\n%s", c, logs.String())
			}
			if err := run(6); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestNonFiniteIsModelFault: a NaN frame (Sqrt of a negative input) is
// the depth model's fault, wrapping ErrInvalidOutput, counted per model by
// its session and logged once per lograte interval, however many frames.
func TestNonFiniteIsModelFault(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	sp := spec(1, 4, 4, MeaningMetricDepth)
	sp.Input.Mean, sp.Input.Std = []float32{0.5}, []float32{1} // black pixels -> -0.5 -> Sqrt = NaN
	m, err := OpenModels(context.Background(), ModelsConfig{Depth: saveModel(t, sqrtModel(4, 4)), DepthSpec: sp}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	black := make([]uint8, 3*4*4)
	for range 3 {
		_, err = m.RunDepth(context.Background(), black, 4, 4)
		var mf *ModelFault
		if !errors.As(err, &mf) || !errors.Is(err, ErrInvalidOutput) || mf.Kind != FaultNonFinite || mf.Model != "depth" || mf.Provider != onnxrt.ProviderCPU {
			t.Fatalf("err = %v (%+v), want a depth non_finite ModelFault wrapping ErrInvalidOutput", err, mf)
		}
	}
	if st := m.DepthSession().Stats(); st.FlaggedFrames != 3 || st.NonFiniteValues != 3*16 {
		t.Fatalf("stats %+v, want 3 flagged frames of 16 NaN each", st)
	}
	if c := strings.Count(logs.String(), "model output holds NaN or Inf"); c != 1 {
		t.Fatalf("%d NaN log lines for 3 frames, want 1 (rate-limited):\n%s", c, logs.String())
	}
	white := make([]uint8, 3*4*4)
	for i := range white {
		white[i] = 255
	}
	if _, err := m.RunDepth(context.Background(), white, 4, 4); err != nil {
		t.Fatalf("a finite frame after NaN frames: %v", err)
	}
}
