package onnxrt

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// headerValues compiles a C program that prints one "name value" line per
// expression against the ONNX Runtime header in dir and returns the values.
func headerValues(t *testing.T, dir string, exprs map[string]string) map[string]int {
	t.Helper()
	cc, err := exec.Command("go", "env", "CC").Output()
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	src.WriteString("#include <stdio.h>\n#include <stddef.h>\n#include \"onnxruntime_c_api.h\"\nint main(void) {\n")
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range exprs {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&src, "  printf(\"%s %%zu\\n\", (size_t)(%s));\n", name, exprs[name])
	}
	src.WriteString("  return 0;\n}\n")
	tmp := t.TempDir()
	c := filepath.Join(tmp, "v.c")
	if err := os.WriteFile(c, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "v")
	if out, err := exec.Command(strings.Fields(string(cc))[0], "-I", dir, "-o", bin, c).CombinedOutput(); err != nil {
		t.Fatalf("compile against %s: %v\n%s", dir, err, out)
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
	return got
}

// bindingHeaderDir is the directory of onnxruntime_go's C header (API 24).
func bindingHeaderDir(t *testing.T) string {
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/yalue/onnxruntime_go").Output()
	if err != nil {
		t.Fatalf("locate the binding: %v", err)
	}
	return strings.TrimSpace(string(dir))
}

// TestGPUAPIIndices checks the OrtApi indices of gpu_cgo.go: those of API
// 24 against the binding's header, the node-placement calls (API 1.24+,
// absent from the binding's header) against the 1.29.0 header that
// `scripts/deps.sh --gpu` unpacks. TestPlacementIsONNXRuntimes checks the
// latter by behaviour on every machine with the 1.29.0 library.
func TestGPUAPIIndices(t *testing.T) {
	want := gpuAPIIndices()
	check := func(dir string, names []string) {
		exprs := map[string]string{}
		for _, n := range names {
			exprs[n] = fmt.Sprintf("offsetof(OrtApi, %s) / sizeof(void *)", n)
		}
		got := headerValues(t, dir, exprs)
		for _, n := range names {
			if got[n] != want[n] {
				t.Errorf("OrtApi.%s: index %d in gpu_cgo.go, %d in %s", n, want[n], got[n], dir)
			}
		}
	}
	check(bindingHeaderDir(t), []string{"GetErrorMessage", "ReleaseStatus", "SessionOptionsAppendExecutionProvider_CUDA", "SessionOptionsAppendExecutionProvider_TensorRT"})
	root := ModuleRoot(mustGetwd(t), func(p string) bool { _, err := os.Stat(p); return err == nil })
	inc := filepath.Join(root, "third_party", "onnxruntime", BundledVersion+"-gpu", "linux-x64", "include")
	if _, err := os.Stat(filepath.Join(inc, "onnxruntime_c_api.h")); err != nil {
		t.Skipf("the %s header is not here (bash scripts/deps.sh --gpu unpacks it into %s); the API 24 indices passed", BundledVersion, inc)
	}
	check(inc, []string{"Session_GetEpGraphAssignmentInfo", "EpAssignedSubgraph_GetEpName", "EpAssignedSubgraph_GetNodes",
		"EpAssignedNode_GetName", "EpAssignedNode_GetOperatorType"})
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// TestGPUStructLayout compares every field offset and the size of the V1
// provider option structs of gpu_cgo.go with the binding's header.
func TestGPUStructLayout(t *testing.T) {
	cudaFields := []string{"device_id", "cudnn_conv_algo_search", "gpu_mem_limit", "arena_extend_strategy",
		"do_copy_in_default_stream", "has_user_compute_stream", "user_compute_stream", "default_memory_arena_cfg",
		"tunable_op_enable", "tunable_op_tuning_enable", "tunable_op_max_tuning_duration_ms"}
	trtFields := []string{"device_id", "has_user_compute_stream", "user_compute_stream", "trt_max_partition_iterations",
		"trt_min_subgraph_size", "trt_max_workspace_size", "trt_fp16_enable", "trt_int8_enable",
		"trt_int8_calibration_table_name", "trt_int8_use_native_calibration_table", "trt_dla_enable", "trt_dla_core",
		"trt_dump_subgraphs", "trt_engine_cache_enable", "trt_engine_cache_path", "trt_engine_decryption_enable",
		"trt_engine_decryption_lib_path", "trt_force_sequential_engine_build"}
	exprs := map[string]string{"cuda_size": "sizeof(OrtCUDAProviderOptions)", "trt_size": "sizeof(OrtTensorRTProviderOptions)"}
	for _, f := range cudaFields {
		exprs["cuda_"+f] = "offsetof(OrtCUDAProviderOptions, " + f + ")"
	}
	for _, f := range trtFields {
		exprs["trt_"+f] = "offsetof(OrtTensorRTProviderOptions, " + f + ")"
	}
	got := headerValues(t, bindingHeaderDir(t), exprs)
	cuda, trt := gpuStructLayout()
	if len(cuda) != len(cudaFields)+1 || len(trt) != len(trtFields)+1 {
		t.Fatalf("gpu_cgo.go lists %d and %d offsets, the test %d and %d fields", len(cuda), len(trt), len(cudaFields), len(trtFields))
	}
	for i, f := range cudaFields {
		if cuda[i] != got["cuda_"+f] {
			t.Errorf("OrtCUDAProviderOptions.%s: offset %d here, %d in the header", f, cuda[i], got["cuda_"+f])
		}
	}
	for i, f := range trtFields {
		if trt[i] != got["trt_"+f] {
			t.Errorf("OrtTensorRTProviderOptions.%s: offset %d here, %d in the header", f, trt[i], got["trt_"+f])
		}
	}
	if cuda[len(cudaFields)] != got["cuda_size"] || trt[len(trtFields)] != got["trt_size"] {
		t.Errorf("sizes %d, %d here; %d, %d in the header", cuda[len(cudaFields)], trt[len(trtFields)], got["cuda_size"], got["trt_size"])
	}
}
