package onnxrt

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// OrtApi member indices used here. Members up to ORT_API_VERSION 24 are
// checked by TestGPUAPIIndices against the binding's header; the
// Session_GetEpGraphAssignmentInfo family (OrtApi 407-412) exists from
// ONNX Runtime 1.24 on in the table and first appears in the 1.29 header
// that `scripts/deps.sh --gpu` unpacks (third_party/onnxruntime/1.29.0-gpu/
// include), which the same test reads when it is there. ONNX Runtime only
// appends to OrtApi, so an index stays valid in every later version.
enum {
	gpuGetErrorMessage = 2,
	gpuReleaseStatus = 93,
	gpuAppendCUDA = 152,
	gpuAppendTensorRT = 159,
	gpuGetEpGraphAssignmentInfo = 407,
	gpuEpAssignedSubgraphGetEpName = 408,
	gpuEpAssignedSubgraphGetNodes = 409,
	gpuEpAssignedNodeGetName = 410,
	gpuEpAssignedNodeGetOperatorType = 412,
};

static int gpu_api_index(int i) {
	static const int idx[] = {gpuGetErrorMessage, gpuReleaseStatus, gpuAppendCUDA, gpuAppendTensorRT,
		gpuGetEpGraphAssignmentInfo, gpuEpAssignedSubgraphGetEpName, gpuEpAssignedSubgraphGetNodes,
		gpuEpAssignedNodeGetName, gpuEpAssignedNodeGetOperatorType};
	return (i >= 0 && i < (int)(sizeof idx / sizeof idx[0])) ? idx[i] : -1;
}

// The V1 provider option structs of onnxruntime_c_api.h ("legacy structs",
// frozen by ONNX Runtime: new options go to the V2 key/value API). Copied
// by layout; TestGPUStructLayout compares every offset with the header.
typedef struct {
	int device_id;
	int cudnn_conv_algo_search; // enum OrtCudnnConvAlgoSearch
	size_t gpu_mem_limit;
	int arena_extend_strategy;
	int do_copy_in_default_stream;
	int has_user_compute_stream;
	void *user_compute_stream;
	void *default_memory_arena_cfg;
	int tunable_op_enable;
	int tunable_op_tuning_enable;
	int tunable_op_max_tuning_duration_ms;
} gpuCUDAOptions;

typedef struct {
	int device_id;
	int has_user_compute_stream;
	void *user_compute_stream;
	int trt_max_partition_iterations;
	int trt_min_subgraph_size;
	size_t trt_max_workspace_size;
	int trt_fp16_enable;
	int trt_int8_enable;
	const char *trt_int8_calibration_table_name;
	int trt_int8_use_native_calibration_table;
	int trt_dla_enable;
	int trt_dla_core;
	int trt_dump_subgraphs;
	int trt_engine_cache_enable;
	const char *trt_engine_cache_path;
	int trt_engine_decryption_enable;
	const char *trt_engine_decryption_lib_path;
	int trt_force_sequential_engine_build;
} gpuTRTOptions;

static size_t gpu_cuda_offset(int i) {
	switch (i) {
	case 0: return offsetof(gpuCUDAOptions, device_id);
	case 1: return offsetof(gpuCUDAOptions, cudnn_conv_algo_search);
	case 2: return offsetof(gpuCUDAOptions, gpu_mem_limit);
	case 3: return offsetof(gpuCUDAOptions, arena_extend_strategy);
	case 4: return offsetof(gpuCUDAOptions, do_copy_in_default_stream);
	case 5: return offsetof(gpuCUDAOptions, has_user_compute_stream);
	case 6: return offsetof(gpuCUDAOptions, user_compute_stream);
	case 7: return offsetof(gpuCUDAOptions, default_memory_arena_cfg);
	case 8: return offsetof(gpuCUDAOptions, tunable_op_enable);
	case 9: return offsetof(gpuCUDAOptions, tunable_op_tuning_enable);
	case 10: return offsetof(gpuCUDAOptions, tunable_op_max_tuning_duration_ms);
	case 11: return sizeof(gpuCUDAOptions);
	}
	return (size_t) -1;
}

static size_t gpu_trt_offset(int i) {
	switch (i) {
	case 0: return offsetof(gpuTRTOptions, device_id);
	case 1: return offsetof(gpuTRTOptions, has_user_compute_stream);
	case 2: return offsetof(gpuTRTOptions, user_compute_stream);
	case 3: return offsetof(gpuTRTOptions, trt_max_partition_iterations);
	case 4: return offsetof(gpuTRTOptions, trt_min_subgraph_size);
	case 5: return offsetof(gpuTRTOptions, trt_max_workspace_size);
	case 6: return offsetof(gpuTRTOptions, trt_fp16_enable);
	case 7: return offsetof(gpuTRTOptions, trt_int8_enable);
	case 8: return offsetof(gpuTRTOptions, trt_int8_calibration_table_name);
	case 9: return offsetof(gpuTRTOptions, trt_int8_use_native_calibration_table);
	case 10: return offsetof(gpuTRTOptions, trt_dla_enable);
	case 11: return offsetof(gpuTRTOptions, trt_dla_core);
	case 12: return offsetof(gpuTRTOptions, trt_dump_subgraphs);
	case 13: return offsetof(gpuTRTOptions, trt_engine_cache_enable);
	case 14: return offsetof(gpuTRTOptions, trt_engine_cache_path);
	case 15: return offsetof(gpuTRTOptions, trt_engine_decryption_enable);
	case 16: return offsetof(gpuTRTOptions, trt_engine_decryption_lib_path);
	case 17: return offsetof(gpuTRTOptions, trt_force_sequential_engine_build);
	case 18: return sizeof(gpuTRTOptions);
	}
	return (size_t) -1;
}

typedef struct {
	const void *(*GetApi)(uint32_t version);
	const char *(*GetVersionString)(void);
} gpuApiBase;

typedef const char *(*gpuErrMsgFn)(const void *);
typedef void (*gpuReleaseFn)(void *);
typedef void *(*gpuAppendFn)(void *, const void *);
typedef void *(*gpuAssignFn)(const void *, const void *const **, size_t *);
typedef void *(*gpuNameFn)(const void *, const char **);
typedef void *(*gpuNodesFn)(const void *, const void *const **, size_t *);

// gpu_api opens the library at path (the binding's: dlopen returns the
// same object, and the handle stays open for the process, so the table
// stays valid) and returns its OrtApi of the given version, NULL when the
// library does not serve it.
static const void *gpu_api(const char *path, uint32_t version, char *err, int errlen) {
	err[0] = 0;
	void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		strncpy(err, e ? e : "dlopen failed", errlen - 1);
		err[errlen - 1] = 0;
		return NULL;
	}
	const gpuApiBase *(*base_fn)(void) = (const gpuApiBase *(*)(void)) dlsym(h, "OrtGetApiBase");
	const gpuApiBase *base = base_fn ? base_fn() : NULL;
	const void *api = base && base->GetApi ? base->GetApi(version) : NULL;
	if (!api) {
		strncpy(err, "the library does not serve this OrtApi version", errlen - 1);
		err[errlen - 1] = 0;
	}
	return api;
}

static int gpu_status(void *const *api, void *st, char *err, int errlen) {
	if (!st) return 0;
	const char *m = ((gpuErrMsgFn) api[gpuGetErrorMessage])(st);
	strncpy(err, m ? m : "unknown ONNX Runtime error", errlen - 1);
	err[errlen - 1] = 0;
	((gpuReleaseFn) api[gpuReleaseStatus])(st);
	return 1;
}

// gpu_append_cuda appends the CUDA provider with the V1 options: the V2
// CreateCUDAProviderOptions of some builds answers "CUDA execution
// provider is not enabled in this build" while V1 loads
// libonnxruntime_providers_cuda.so from beside the core. Defaults are the
// C++ constructor's (onnxruntime_c_api.h).
static int gpu_append_cuda(const void *api, void *opts, int device, size_t mem_limit, char *err, int errlen) {
	err[0] = 0;
	gpuCUDAOptions o;
	memset(&o, 0, sizeof o);
	o.device_id = device;
	o.cudnn_conv_algo_search = 0; // OrtCudnnConvAlgoSearchExhaustive
	o.gpu_mem_limit = mem_limit ? mem_limit : SIZE_MAX;
	o.do_copy_in_default_stream = 1;
	void *const *a = (void *const *) api;
	return gpu_status(a, ((gpuAppendFn) a[gpuAppendCUDA])(opts, &o), err, errlen);
}

// gpu_append_trt appends TensorRT with the V1 options (no optimization
// profiles: those exist only as V2 keys).
static int gpu_append_trt(const void *api, void *opts, const gpuTRTOptions *o, char *err, int errlen) {
	err[0] = 0;
	void *const *a = (void *const *) api;
	return gpu_status(a, ((gpuAppendFn) a[gpuAppendTensorRT])(opts, o), err, errlen);
}

// gpu_assignment lists the subgraphs ONNX Runtime assigned to each
// provider (session.record_ep_graph_assignment_info must have been set).
static int gpu_assignment(const void *api, const void *session, const void *const **subs, size_t *n, char *err, int errlen) {
	err[0] = 0;
	void *const *a = (void *const *) api;
	return gpu_status(a, ((gpuAssignFn) a[gpuGetEpGraphAssignmentInfo])(session, subs, n), err, errlen);
}

// gpu_subgraph reports subgraph i's provider and its nodes.
static int gpu_subgraph(const void *api, const void *const *subs, size_t i, const char **ep,
		const void *const **nodes, size_t *n, char *err, int errlen) {
	err[0] = 0;
	void *const *a = (void *const *) api;
	if (gpu_status(a, ((gpuNameFn) a[gpuEpAssignedSubgraphGetEpName])(subs[i], ep), err, errlen)) return 1;
	return gpu_status(a, ((gpuNodesFn) a[gpuEpAssignedSubgraphGetNodes])(subs[i], nodes, n), err, errlen);
}

// gpu_dlcheck opens path as the dynamic loader would for ONNX Runtime and
// reports why it cannot (a missing dependency: "libcublasLt.so.13: cannot
// open shared object file"); 0 when it opens.
static int gpu_dlcheck(const char *path, char *err, int errlen) {
	err[0] = 0;
	void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	if (h) {
		dlclose(h);
		return 0;
	}
	const char *e = dlerror();
	strncpy(err, e ? e : "dlopen failed", errlen - 1);
	err[errlen - 1] = 0;
	return 1;
}

static int gpu_node_op(const void *api, const void *const *nodes, size_t i, const char **op, char *err, int errlen) {
	err[0] = 0;
	void *const *a = (void *const *) api;
	return gpu_status(a, ((gpuNameFn) a[gpuEpAssignedNodeGetOperatorType])(nodes[i], op), err, errlen);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"
)

// assignmentAPIVersion is the OrtApi version asked for the node
// assignment calls: the header they were indexed from (ONNX Runtime
// 1.29.0), so that an older library answers NULL instead of a short table.
const (
	assignmentAPIVersion = 29
	AssignmentMinVersion = "1.29.0"
)

// ortAPI returns the OrtApi table of the given version of the library at
// path.
func ortAPI(path string, version uint32) (unsafe.Pointer, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var errb [256]C.char
	api := C.gpu_api(cpath, C.uint32_t(version), &errb[0], C.int(len(errb)))
	if api == nil {
		return nil, fmt.Errorf("ONNX Runtime %q, OrtApi %d: %s", path, version, C.GoString(&errb[0]))
	}
	return unsafe.Pointer(api), nil
}

// appendCUDAV1 adds the CUDA provider to opts through the V1 C call.
func appendCUDAV1(libPath string, opts *ort.SessionOptions, device int, memLimit int64) error {
	api, err := ortAPI(libPath, requiredAPI)
	if err != nil {
		return err
	}
	p, err := optionsPointer(opts)
	if err != nil {
		return err
	}
	var errb [1024]C.char
	if C.gpu_append_cuda(api, p, C.int(device), C.size_t(memLimit), &errb[0], C.int(len(errb))) != 0 {
		return errors.New(C.GoString(&errb[0]))
	}
	return nil
}

// trtV1 are the V1 TensorRT options this package sets.
type trtV1 struct {
	device        int
	fp16          bool
	workspace     int64
	cacheDir      string // "" = no engine cache
	minSubgraph   int
	maxPartitions int
}

// appendTensorRTV1 adds TensorRT to opts through the V1 C call.
func appendTensorRTV1(libPath string, opts *ort.SessionOptions, o trtV1) error {
	api, err := ortAPI(libPath, requiredAPI)
	if err != nil {
		return err
	}
	p, err := optionsPointer(opts)
	if err != nil {
		return err
	}
	var c C.gpuTRTOptions
	c.device_id = C.int(o.device)
	c.trt_max_partition_iterations = C.int(o.maxPartitions)
	c.trt_min_subgraph_size = C.int(o.minSubgraph)
	c.trt_max_workspace_size = C.size_t(o.workspace)
	if o.fp16 {
		c.trt_fp16_enable = 1
	}
	empty := C.CString("")
	defer C.free(unsafe.Pointer(empty))
	c.trt_int8_calibration_table_name = empty
	c.trt_engine_decryption_lib_path = empty
	c.trt_engine_cache_path = empty
	if o.cacheDir != "" {
		dir := C.CString(o.cacheDir)
		defer C.free(unsafe.Pointer(dir))
		c.trt_engine_cache_enable = 1
		c.trt_engine_cache_path = dir
	}
	var errb [1024]C.char
	if C.gpu_append_trt(api, p, &c, &errb[0], C.int(len(errb))) != 0 {
		return errors.New(C.GoString(&errb[0]))
	}
	return nil
}

// optionsPointer is sessionOptionsPointer with an error that does not
// name the thread pool.
func optionsPointer(o *ort.SessionOptions) (unsafe.Pointer, error) {
	p, err := sessionOptionsPointer(o)
	if err != nil {
		return nil, fmt.Errorf("append execution provider: %w", err)
	}
	return p, nil
}

// SessionPointer returns the OrtSession* behind the binding's
// AdvancedSession (its first field in onnxruntime_go v1.27.0; checked by
// reflection, so a changed binding gives an error, never a wild pointer).
func SessionPointer(s *ort.AdvancedSession) (unsafe.Pointer, error) {
	t := reflect.TypeFor[ort.AdvancedSession]()
	if t.NumField() == 0 || t.Field(0).Name != "ortSession" || t.Field(0).Type.Kind() != reflect.Pointer || t.Field(0).Offset != 0 {
		return nil, errors.New("onnxruntime_go's AdvancedSession has not the layout this code knows (OrtSession* first)")
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(s))
	if p == nil {
		return nil, errors.New("session not created")
	}
	return p, nil
}

// DynamicSessionPointer is SessionPointer for a DynamicAdvancedSession
// (a wrapper of one *AdvancedSession in v1.27.0).
func DynamicSessionPointer(s *ort.DynamicAdvancedSession) (unsafe.Pointer, error) {
	t := reflect.TypeFor[ort.DynamicAdvancedSession]()
	if t.NumField() != 1 || t.Field(0).Type != reflect.TypeFor[*ort.AdvancedSession]() {
		return nil, errors.New("onnxruntime_go's DynamicAdvancedSession has not the layout this code knows")
	}
	inner := *(**ort.AdvancedSession)(unsafe.Pointer(s))
	if inner == nil {
		return nil, errors.New("session not created")
	}
	return SessionPointer(inner)
}

// NodeAssignment reads ONNX Runtime's own record of which provider each
// node of the session's graph was assigned to (after its graph
// optimizations): nodes per provider, and the operator types per provider.
func NodeAssignment(libPath string, session unsafe.Pointer) ([]ProviderNodes, error) {
	api, err := ortAPI(libPath, assignmentAPIVersion)
	if err != nil {
		return nil, err
	}
	var subs *unsafe.Pointer
	var n C.size_t
	var errb [512]C.char
	if C.gpu_assignment(api, session, (**unsafe.Pointer)(unsafe.Pointer(&subs)), &n, &errb[0], C.int(len(errb))) != 0 {
		return nil, fmt.Errorf("node assignment: %s", C.GoString(&errb[0]))
	}
	var out []ProviderNodes
	index := map[string]int{}
	for i := range int(n) {
		var ep *C.char
		var nodes *unsafe.Pointer
		var nn C.size_t
		if C.gpu_subgraph(api, (*unsafe.Pointer)(unsafe.Pointer(subs)), C.size_t(i), &ep, (**unsafe.Pointer)(unsafe.Pointer(&nodes)), &nn, &errb[0], C.int(len(errb))) != 0 {
			return nil, fmt.Errorf("node assignment: subgraph %d: %s", i, C.GoString(&errb[0]))
		}
		name := C.GoString(ep)
		k, ok := index[name]
		if !ok {
			k = len(out)
			index[name] = k
			out = append(out, ProviderNodes{Provider: name, Ops: map[string]int{}})
		}
		out[k].Nodes += int(nn)
		for j := range int(nn) {
			var op *C.char
			if C.gpu_node_op(api, (*unsafe.Pointer)(unsafe.Pointer(nodes)), C.size_t(j), &op, &errb[0], C.int(len(errb))) != 0 {
				return nil, fmt.Errorf("node assignment: node %d of subgraph %d: %s", j, i, C.GoString(&errb[0]))
			}
			out[k].Ops[C.GoString(op)]++
		}
	}
	return out, nil
}

// dlCheck reports why the dynamic loader cannot open the library at path
// (nil when it can). ONNX Runtime's own error for a provider library says
// only "Failed to load shared library" (the reason goes to its log), so a
// failed provider is diagnosed with it.
func dlCheck(path string) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var errb [1024]C.char
	if C.gpu_dlcheck(cpath, &errb[0], C.int(len(errb))) != 0 {
		return errors.New(C.GoString(&errb[0]))
	}
	return nil
}

// gpuAPIIndices lists the OrtApi member indices the C code above uses, by
// member name, for TestGPUAPIIndices.
func gpuAPIIndices() map[string]int {
	names := []string{"GetErrorMessage", "ReleaseStatus", "SessionOptionsAppendExecutionProvider_CUDA",
		"SessionOptionsAppendExecutionProvider_TensorRT", "Session_GetEpGraphAssignmentInfo",
		"EpAssignedSubgraph_GetEpName", "EpAssignedSubgraph_GetNodes", "EpAssignedNode_GetName",
		"EpAssignedNode_GetOperatorType"}
	m := make(map[string]int, len(names))
	for i, n := range names {
		m[n] = int(C.gpu_api_index(C.int(i)))
	}
	return m
}

// gpuStructLayout lists the offsets (and, last, the size) of the V1
// option structs as this file defines them, for TestGPUStructLayout.
func gpuStructLayout() (cuda, trt []int) {
	for i := 0; ; i++ {
		o := C.gpu_cuda_offset(C.int(i))
		if o == C.size_t(^uint(0)) {
			break
		}
		cuda = append(cuda, int(o))
	}
	for i := 0; ; i++ {
		o := C.gpu_trt_offset(C.int(i))
		if o == C.size_t(^uint(0)) {
			break
		}
		trt = append(trt, int(o))
	}
	return cuda, trt
}
