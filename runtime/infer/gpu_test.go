package infer

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// The GPU tests need an NVIDIA GPU, ONNX Runtime's GPU build as the
// process's library (ONNXRUNTIME_LIB, or a config that names a GPU
// provider with `scripts/deps.sh --gpu` done) and the CUDA 13 libraries on
// the loader path; scripts/gpu-check.sh sets all three on the device
// machine. Without a GPU they skip with "no NVIDIA GPU".

// requireGPUBuild skips unless the machine has an NVIDIA GPU and the
// library the tests run on is a GPU build.
func requireGPUBuild(t *testing.T) onnxrt.Library {
	t.Helper()
	requireGPU(t)
	lib, err := onnxrt.ResolveLibraryFor("", true)
	if err != nil {
		t.Fatal(err)
	}
	if !lib.GPU {
		t.Skipf("ONNX Runtime %s is a CPU build (no %s beside it): run scripts/gpu-check.sh, or set %s to the GPU build",
			lib.Path, onnxrt.ProviderLibrary(onnxrt.ProviderCUDA), onnxrt.LibraryEnvVar)
	}
	return lib
}

// gpuBuildDir is the project's GPU build, "" when `scripts/deps.sh --gpu`
// has not fetched it.
func gpuBuildDir(t *testing.T) string {
	root := onnxrt.ModuleRoot(mustGetwd(t), func(p string) bool { _, err := os.Stat(p); return err == nil })
	dir := filepath.Join(root, "third_party", "onnxruntime", onnxrt.BundledVersion+"-gpu", "linux-x64")
	if _, err := os.Stat(filepath.Join(dir, onnxrt.ProviderLibrary(onnxrt.ProviderCUDA))); err != nil {
		return ""
	}
	return dir
}

// childEnv marks a run of the test binary as the child of
// TestGPUBuildWithoutCUDA: one process loads one ONNX Runtime library, so
// the GPU build gets a process of its own.
const childEnv = "DIDOEDGE_INFER_GPU_CHILD"

// TestGPUBuildWithoutCUDA is a CPU test of the GPU build on a machine
// without CUDA: the 1.29.0 core loads, its V1 CUDA call reaches
// libonnxruntime_providers_cuda.so and stops at the first CUDA 13 library
// it needs (libcublasLt.so.13), the warning says so and what to do, and the
// session falls back to the CPU with ONNX Runtime's placement saying CPU.
func TestGPUBuildWithoutCUDA(t *testing.T) {
	skipWithGPU(t)
	dir := gpuBuildDir(t)
	if dir == "" {
		t.Skip("the GPU build is not fetched (bash scripts/deps.sh --gpu)")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGPUBuildChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1", onnxrt.LibraryEnvVar+"="+filepath.Join(dir, "libonnxruntime.so.1"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestGPUBuildChild") {
		t.Fatalf("the child did not run:\n%s", out)
	}
}

func TestGPUBuildChild(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("the child process of TestGPUBuildWithoutCUDA")
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cfg := onnxrt.Config{Providers: []onnxrt.ProviderConfig{{Name: onnxrt.ProviderCUDA}, {Name: onnxrt.ProviderCPU}}}
	s := newSession(t, saveModel(t, affineModel(1, 2, 2, 3, 0)), spec(1, 2, 2, MeaningMetricDepth), cfg, log)
	if s.Provider() != onnxrt.ProviderCPU || s.Library().Version != onnxrt.BundledVersion || !s.Library().GPU {
		t.Fatalf("provider %q, library %+v", s.Provider(), s.Library())
	}
	text := logs.String()
	for _, want := range []string{`msg="ONNX Runtime loaded"`, "version=" + onnxrt.BundledVersion, "gpu_build=true",
		"provider=cuda next=cpu", "OrtSessionOptionsAppendExecutionProvider_Cuda", "libcublasLt.so.13: cannot open shared object file",
		"set LD_LIBRARY_PATH", `nodes="CPUExecutionProvider 4"`} {
		if !strings.Contains(text, want) {
			t.Errorf("log does not say %q:\n%s", want, text)
		}
	}
	if c := strings.Count(text, "level=WARN"); c != 1 {
		t.Errorf("%d warnings, want one (the fallback):\n%s", c, text)
	}
	t.Log(text)
}

// TestCUDAModelsMatchCPU (GPU): the reference depth model and AuxUE on a
// required CUDA provider give the CPU provider's maps within 1e-3
// (relative to max(1, |value|); cuDNN's convolution algorithms sum in
// another order), and
// ONNX Runtime placed nodes of both on CUDAExecutionProvider.
func TestCUDAModelsMatchCPU(t *testing.T) {
	requireGPUBuild(t)
	p := modelPairs(t)[1]
	open := func(providers []onnxrt.ProviderConfig) *Models {
		m, err := OpenModels(context.Background(), ModelsConfig{Depth: p.depth, DepthSpec: p.depthSpec, AuxUE: p.aux, AuxUESpec: p.auxueSpec,
			Inference: onnxrt.Config{Providers: providers}}, slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	gpu := open([]onnxrt.ProviderConfig{{Name: onnxrt.ProviderCUDA, Required: true}})
	cpu := open([]onnxrt.ProviderConfig{{Name: onnxrt.ProviderCPU}})
	for _, s := range []*Session{gpu.DepthSession(), gpu.AuxUESession()} {
		pl := s.Placement()
		t.Logf("%s: %s", s.role(), pl)
		if pl.Nodes("CUDAExecutionProvider") == 0 || s.Provider() != onnxrt.ProviderCUDA {
			t.Fatalf("%s: provider %s, placement %s: no node on CUDA", s.role(), s.Provider(), pl)
		}
	}
	frames, ws, hs := batchFrames(1, 640, 192)
	mg, err := gpu.Infer(context.Background(), frames[0], ws[0], hs[0])
	if err != nil {
		t.Fatal(err)
	}
	g := [][]float32{clone(mg.Depth), clone(mg.Scale), clone(mg.Epistemic)}
	mc, err := cpu.Infer(context.Background(), frames[0], ws[0], hs[0])
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range [][]float32{mc.Depth, mc.Scale, mc.Epistemic} {
		if d := maxRelDiff(g[i], c); d > 1e-3 {
			t.Errorf("map %d: CUDA and CPU differ by %.3g (relative), want <= 1e-3", i, d)
		}
	}
}

// TestCUDAFaultRebuildsOnCPU (GPU): two injected run failures on the CUDA
// session give one ModelFault and a session rebuilt on the next provider,
// the CPU, whose placement says so and whose results are right.
func TestCUDAFaultRebuildsOnCPU(t *testing.T) {
	requireGPUBuild(t)
	s := newSession(t, saveModel(t, affineModel(1, 2, 2, 3, 1)), spec(1, 2, 2, MeaningMetricDepth),
		onnxrt.Config{Providers: []onnxrt.ProviderConfig{{Name: onnxrt.ProviderCUDA}, {Name: onnxrt.ProviderCPU}}}, slog.Default())
	if s.Provider() != onnxrt.ProviderCUDA {
		t.Fatalf("provider %q, want cuda", s.Provider())
	}
	s.injectRunFailures(2)
	_, err := s.Run(context.Background())
	var mf *ModelFault
	if !errors.As(err, &mf) || mf.Provider != onnxrt.ProviderCUDA || mf.Action != "retried once, then rebuilt the session on cpu" {
		t.Fatalf("err = %v", err)
	}
	if s.Provider() != onnxrt.ProviderCPU || s.Placement().Nodes("CPUExecutionProvider") != 4 {
		t.Fatalf("after the rebuild: provider %q, placement %s", s.Provider(), s.Placement())
	}
	copy(s.Input(), []float32{1, 2, 3, 4})
	if _, err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, v := range s.Output(0) {
		if v != 3*float32(i+1)+1 {
			t.Fatalf("value %d = %g", i, v)
		}
	}
}

// TestCUDADefaultBatch (GPU): a default batch (IfDynamic) is kept on CUDA:
// the session the provider actually runs takes 4 frames per run.
func TestCUDADefaultBatch(t *testing.T) {
	requireGPUBuild(t)
	p := modelPairs(t)[1]
	s, err := OpenSession(context.Background(), dynamicCopy(t, p.depth), p.depthSpec,
		onnxrt.Config{Providers: []onnxrt.ProviderConfig{{Name: onnxrt.ProviderCUDA}, {Name: onnxrt.ProviderCPU}}}, SessionOptions{MaxBatch: 4, IfDynamic: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Provider() != onnxrt.ProviderCUDA || s.MaxBatch() != 4 || !s.onGPU() {
		t.Fatalf("provider %q, batch %d, want cuda with 4", s.Provider(), s.MaxBatch())
	}
}

// TestDefaultBatchFollowsProvider (CPU test): a default batch of 4 asked
// with a GPU provider first becomes one frame per run when the session
// falls back to the CPU; an explicit batch stays.
func TestDefaultBatchFollowsProvider(t *testing.T) {
	skipWithGPU(t)
	p := modelPairs(t)[0]
	dyn := dynamicCopy(t, p.depth)
	for _, tc := range []struct {
		name      string
		providers []onnxrt.ProviderConfig
		ifDynamic bool
		want      int
	}{
		{"default, cuda falls back to cpu", []onnxrt.ProviderConfig{{Name: onnxrt.ProviderCUDA}, {Name: onnxrt.ProviderCPU}}, true, 1},
		{"explicit batch on cpu", []onnxrt.ProviderConfig{{Name: onnxrt.ProviderCPU}}, false, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := OpenSession(context.Background(), dyn, p.depthSpec, onnxrt.Config{Providers: tc.providers},
				SessionOptions{MaxBatch: 4, IfDynamic: tc.ifDynamic}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.Provider() != onnxrt.ProviderCPU || s.MaxBatch() != tc.want {
				t.Fatalf("provider %q, batch %d, want cpu with %d", s.Provider(), s.MaxBatch(), tc.want)
			}
			if _, err := s.RunBatch(context.Background(), tc.want); err != nil {
				t.Fatal(err)
			}
			if tc.want == 1 {
				if _, err := s.RunBatch(context.Background(), 2); err == nil {
					t.Fatal("a batch of 2 ran on a session with batch 1")
				}
			}
		})
	}
}

// On CUDA, device-resident tensors (device_tensors auto) run the
// reference models with the maps of the CPU provider (1e-3 relative, as
// TestCUDAModelsMatchCPU), and so does the host path (off), batched too:
// batches of 1 to 3 cameras through shared views of dynamic-batch
// copies, whose host-path inputs are bound again before each run (a
// binding uploads at bind time). It reports the copies per frame and
// their share of the models' run time (goal <= 0.10).
func TestCUDADeviceTensors(t *testing.T) {
	requireGPUBuild(t)
	ref := modelPairs(t)[1]
	dref := ref
	dref.depth, dref.aux = dynamicCopy(t, ref.depth), dynamicCopy(t, ref.aux)
	cuda := []onnxrt.ProviderConfig{{Name: onnxrt.ProviderCUDA, Required: true}}
	for _, k := range []deviceKind{
		{name: "reference", pair: ref, device: true},
		{name: "reference batch 3 views", pair: dref, batch: 3, views: 3, device: true},
	} {
		t.Run(k.name, func(t *testing.T) {
			open := func(providers []onnxrt.ProviderConfig, mode string) *Models {
				m, err := OpenModels(context.Background(), ModelsConfig{Depth: k.pair.depth, DepthSpec: k.pair.depthSpec, AuxUE: k.pair.aux,
					AuxUESpec: k.pair.auxueSpec, Inference: onnxrt.Config{Providers: providers, DeviceTensors: mode}, BatchSize: k.batch}, slog.Default())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { m.Close() })
				return m
			}
			cpu := open([]onnxrt.ProviderConfig{{Name: onnxrt.ProviderCPU}}, onnxrt.DeviceTensorsOff)
			dev, host := open(cuda, onnxrt.DeviceTensorsAuto), open(cuda, onnxrt.DeviceTensorsOff)
			if got := dev.DeviceResident(); got != "Cuda" {
				t.Fatalf("CUDA, device_tensors auto: DeviceResident %q, want Cuda", got)
			}
			cv, dv, hv := kindViews(t, cpu, k), kindViews(t, dev, k), kindViews(t, host, k)
			var copies, runs time.Duration
			frames := 0
			for r := range 6 {
				want, _ := inferKind(t, cpu, cv, k, r)
				for _, c := range []struct {
					name string
					m    *Models
					v    []*Models
				}{{"device", dev, dv}, {"host", host, hv}} {
					got, tm := inferKind(t, c.m, c.v, k, r)
					for i := range want {
						if d := maxRelDiff(got[i], want[i]); d > 1e-3 {
							t.Fatalf("round %d, %s path: map %d differs from the CPU's by %.3g (relative), want <= 1e-3", r, c.name, i, d)
						}
					}
					if c.name == "device" && r > 0 { // round 0 warms up
						copies += tm.Copy
						runs += tm.Depth + tm.AuxUE
						frames += len(got) / 6
					}
				}
			}
			if copies <= 0 {
				t.Fatalf("device path: no copy time measured")
			}
			t.Logf("CUDA device-resident tensors: copies %v per frame, %.3f of the models' run time (%v per frame)",
				copies/time.Duration(frames), float64(copies)/float64(runs), runs/time.Duration(frames))
		})
	}
}
