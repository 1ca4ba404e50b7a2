package onnxrt

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestEngineCacheKey(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	got := engineCacheKey(sha, true, []int64{1, 3, 192, 640})
	if got != "abababababababab_fp16_1x3x192x640" {
		t.Fatalf("key %q", got)
	}
	if engineCacheKey(sha, false, []int64{1, 3, 192, 640}) == got || engineCacheKey(sha, true, []int64{1, 3, 256, 640}) == got {
		t.Fatal("precision and shape must change the key")
	}
	dir := t.TempDir()
	o, err := TensorRTOptions(ProviderConfig{Name: ProviderTensorRT, DeviceID: 1, FP16: true, EngineCacheDir: dir, WorkspaceBytes: 1 << 30}, sha, []int64{1, 3, 192, 640}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o["device_id"] != "1" || o["trt_fp16_enable"] != "1" || o["trt_max_workspace_size"] != "1073741824" ||
		o["trt_engine_cache_path"] != filepath.Join(dir, got) || !fileExists(o["trt_engine_cache_path"]) {
		t.Fatalf("options %v", o)
	}
}

// TestSignalGuardRestoresHandlers replaces SIGINT's handler from C inside the
// guard, as the CUDA provider does, and checks Go still receives SIGINT.
func TestSignalGuardRestoresHandlers(t *testing.T) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt)
	defer signal.Stop(ch)
	changed := WithSignalsPreserved(func() { ignoreSignalFromC(int(syscall.SIGINT)) })
	if changed != 1 {
		t.Fatalf("guard saw %d changed handlers, want 1", changed)
	}
	expectSignal(t, ch)
}

// The OrtApi indices in threads.go are those of the header the binding is
// compiled with: a C program built against it prints offsetof/sizeof.
func TestOrtAPIIndices(t *testing.T) {
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/yalue/onnxruntime_go").Output()
	if err != nil {
		t.Fatalf("locate the binding: %v", err)
	}
	header := filepath.Join(strings.TrimSpace(string(dir)), "onnxruntime_c_api.h")
	if _, err := os.Stat(header); err != nil {
		t.Fatal(err)
	}
	cc, err := exec.Command("go", "env", "CC").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := ortAPIIndices()
	var src strings.Builder
	src.WriteString("#include <stdio.h>\n#include <stddef.h>\n#include \"onnxruntime_c_api.h\"\nint main(void) {\n")
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
		fmt.Fprintf(&src, "  printf(\"%s %%zu\\n\", offsetof(OrtApi, %s) / sizeof(void *));\n", n, n)
	}
	src.WriteString("  return 0;\n}\n")
	tmp := t.TempDir()
	c := filepath.Join(tmp, "idx.c")
	if err := os.WriteFile(c, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "idx")
	if out, err := exec.Command(strings.Fields(string(cc))[0], "-I", filepath.Dir(header), "-o", bin, c).CombinedOutput(); err != nil {
		t.Fatalf("compile against %s: %v\n%s", header, err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		n, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatal(err)
		}
		got[f[0]] = n
	}
	for _, n := range names {
		if got[n] != want[n] {
			t.Errorf("OrtApi.%s: index %d in threads.go, %d in %s", n, want[n], got[n], header)
		}
	}
}

// TestDeviceAPIIndices checks every OrtApi index of device_cgo.go against
// the binding's header (API 24) and, when `scripts/deps.sh --gpu` has
// unpacked it, the 1.29.0 header.
func TestDeviceAPIIndices(t *testing.T) {
	want := devAPIIndices()
	check := func(dir string) {
		exprs := map[string]string{}
		for n := range want {
			exprs[n] = fmt.Sprintf("offsetof(OrtApi, %s) / sizeof(void *)", n)
		}
		got := headerValues(t, dir, exprs)
		for n, i := range want {
			if i < 0 || got[n] != i {
				t.Errorf("OrtApi.%s: index %d in device_cgo.go, %d in %s", n, i, got[n], dir)
			}
		}
	}
	check(bindingHeaderDir(t))
	t.Run(BundledVersion+" header", func(t *testing.T) {
		root := ModuleRoot(mustGetwd(t), func(p string) bool { _, err := os.Stat(p); return err == nil })
		inc := filepath.Join(root, "third_party", "onnxruntime", BundledVersion+"-gpu", "linux-x64", "include")
		if _, err := os.Stat(filepath.Join(inc, "onnxruntime_c_api.h")); err != nil {
			t.Skipf("the %s header is not here (bash scripts/deps.sh --gpu)", BundledVersion)
		}
		check(inc)
	})
}

// The enum values device_cgo.go passes as ints: OrtDeviceAllocator,
// OrtMemTypeDefault, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT.
func TestDeviceEnums(t *testing.T) {
	got := headerValues(t, bindingHeaderDir(t), map[string]string{"dev": "OrtDeviceAllocator", "def": "OrtMemTypeDefault",
		"float": "ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT"})
	if got["dev"] != 0 || got["def"] != 0 || got["float"] != 1 {
		t.Fatalf("header enums %v, device_cgo.go passes 0, 0, 1", got)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{Providers: []ProviderConfig{{Name: "tensorrt"}, {Name: "cuda"}, {Name: "cpu"}}}, ""},
		{Config{}, ""},
		{Config{Providers: []ProviderConfig{{Name: "rocm"}}}, `providers[0].name: "rocm"`},
		{Config{Providers: []ProviderConfig{{Name: "cpu"}, {Name: "cpu"}}}, "listed twice"},
		{Config{Providers: []ProviderConfig{{Name: "cuda", FP16: true}}}, "apply to tensorrt only"},
		{Config{Providers: []ProviderConfig{{Name: "cuda", DeviceID: -1}}}, "device_id"},
		{Config{IntraOpThreads: -2}, "intra_op_threads"},
		{Config{ThreadPool: ThreadPoolGlobal, ThreadSpinning: true}, ""},
		{Config{ThreadPool: ThreadPoolSession, IntraOpThreads: 4}, ""},
		{Config{ThreadPool: "shared"}, `thread_pool: "shared" is not one of global, session`},
		{Config{ThreadPool: "Global"}, `thread_pool: "Global"`},
	}
	for _, tc := range tests {
		err := tc.cfg.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: err = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// expectSignal sends SIGINT to the process and waits for it on ch.
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
