package onnxrt

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// Indices of the OrtApi members used here, in onnxruntime_c_api.h of ORT_API_VERSION 24.
// ONNX Runtime keeps its C API ABI-stable: members are only ever added at the
// end of OrtApi, so a member keeps its index in every later version and the
// table can be read as an array of function pointers. TestOrtAPIIndices checks each index against
// the header the binding is compiled with.
enum {
	ortGetErrorMessage = 2,
	ortReleaseEnv = 92,
	ortReleaseStatus = 93,
	ortCreateEnvWithGlobalThreadPools = 119,
	ortDisablePerSessionThreads = 120,
	ortCreateThreadingOptions = 121,
	ortReleaseThreadingOptions = 122,
	ortSetGlobalIntraOpNumThreads = 147,
	ortSetGlobalInterOpNumThreads = 148,
	ortSetGlobalSpinControl = 149,
};

static int ort_api_index(int i) {
	static const int idx[] = {ortGetErrorMessage, ortReleaseEnv, ortReleaseStatus,
		ortCreateEnvWithGlobalThreadPools, ortDisablePerSessionThreads, ortCreateThreadingOptions,
		ortReleaseThreadingOptions, ortSetGlobalIntraOpNumThreads, ortSetGlobalInterOpNumThreads,
		ortSetGlobalSpinControl};
	return (i >= 0 && i < (int)(sizeof idx / sizeof idx[0])) ? idx[i] : -1;
}

typedef void *(*statusFn1)(void *);
typedef void *(*statusFnInt)(void *, int);
typedef void *(*statusFnOut)(void **);
typedef void *(*createEnvFn)(int, const char *, const void *, void **);
typedef const char *(*errMsgFn)(const void *);
typedef void (*releaseFn)(void *);

typedef struct {
	const void *(*GetApi)(uint32_t version);
	const char *(*GetVersionString)(void);
} gpApiBase;

// take_status copies an OrtStatus's message into err and releases it;
// returns 1 when there was an error.
static int take_status(void *const *api, void *st, char *err, int errlen) {
	if (!st) return 0;
	const char *m = ((errMsgFn) api[ortGetErrorMessage])(st);
	strncpy(err, m ? m : "unknown ONNX Runtime error", errlen - 1);
	err[errlen - 1] = 0;
	((releaseFn) api[ortReleaseStatus])(st);
	return 1;
}

// gp_create_env opens the library at path (the one the binding loads next:
// dlopen returns the same object) and creates ONNX Runtime's process
// environment with global thread pools: intra-op threads as given, no
// inter-op threads (sessions run their graphs sequentially), spinning on or
// off. OrtEnv is a reference-counted singleton, so the binding's own
// CreateEnv that follows gets this environment. The library handle stays open
// until the process ends, so the returned api table stays valid.
static int gp_create_env(const char *path, uint32_t version, int intra, int spin,
		const void **api_out, void **env_out, char *err, int errlen) {
	err[0] = 0;
	void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		strncpy(err, e ? e : "dlopen failed", errlen - 1);
		err[errlen - 1] = 0;
		return 1;
	}
	const gpApiBase *(*base_fn)(void) = (const gpApiBase *(*)(void)) dlsym(h, "OrtGetApiBase");
	const gpApiBase *base = base_fn ? base_fn() : NULL;
	void *const *api = base && base->GetApi ? (void *const *) base->GetApi(version) : NULL;
	if (!api) {
		strncpy(err, "the library does not serve the required OrtApi version", errlen - 1);
		err[errlen - 1] = 0;
		return 1;
	}
	void *tp = NULL;
	if (take_status(api, ((statusFnOut) api[ortCreateThreadingOptions])(&tp), err, errlen)) return 1;
	int failed = take_status(api, ((statusFnInt) api[ortSetGlobalIntraOpNumThreads])(tp, intra), err, errlen) ||
		take_status(api, ((statusFnInt) api[ortSetGlobalInterOpNumThreads])(tp, 1), err, errlen) ||
		take_status(api, ((statusFnInt) api[ortSetGlobalSpinControl])(tp, spin), err, errlen);
	void *env = NULL;
	if (!failed) {
		// 3 = ORT_LOGGING_LEVEL_ERROR, the binding's level.
		failed = take_status(api, ((createEnvFn) api[ortCreateEnvWithGlobalThreadPools])(3, "didoedge", tp, &env), err, errlen);
	}
	((releaseFn) api[ortReleaseThreadingOptions])(tp);
	if (failed) return 1;
	*api_out = (const void *) api;
	*env_out = env;
	return 0;
}

static void gp_release_env(const void *api, void *env) {
	((releaseFn) ((void *const *) api)[ortReleaseEnv])(env);
}

static int gp_disable_per_session_threads(const void *api, void *opts, char *err, int errlen) {
	void *const *a = (void *const *) api;
	return take_status(a, ((statusFn1) a[ortDisablePerSessionThreads])(opts), err, errlen);
}
*/
import "C"

import (
	"fmt"
	"reflect"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"
)

// Thread pool modes (Config.ThreadPool).
const (
	// ThreadPoolGlobal: one intra-op pool in the ONNX Runtime environment,
	// shared by every session of the process.
	ThreadPoolGlobal = "global"
	// ThreadPoolSession: each session owns its intra-op pool (ONNX
	// Runtime's default).
	ThreadPoolSession = "session"
)

// poolSettings configure the process-wide intra-op pool.
type poolSettings struct {
	intraOp  int // 0 = ONNX Runtime's default (one thread per physical core)
	spinning bool
}

// GlobalPools is the environment reference that owns ONNX Runtime's global
// thread pools; it is taken before the binding's and released after it, so
// the pools live exactly as long as the environment.
type GlobalPools struct {
	api      unsafe.Pointer // const OrtApi*
	env      unsafe.Pointer // OrtEnv*
	settings poolSettings
}

// createGlobalPools creates the process's ONNX Runtime environment with a
// global intra-op pool from the library at libPath.
func createGlobalPools(libPath string, s poolSettings) (*GlobalPools, error) {
	cpath := C.CString(libPath)
	defer C.free(unsafe.Pointer(cpath))
	var api unsafe.Pointer
	var env unsafe.Pointer
	var errb [512]C.char
	spin := 0
	if s.spinning {
		spin = 1
	}
	if C.gp_create_env(cpath, C.uint32_t(requiredAPI), C.int(s.intraOp), C.int(spin), &api, &env, &errb[0], C.int(len(errb))) != 0 {
		return nil, fmt.Errorf("create ONNX Runtime environment with a global thread pool from %q: %s", libPath, C.GoString(&errb[0]))
	}
	return &GlobalPools{api: api, env: env, settings: s}, nil
}

// release drops the environment reference that holds the pools.
func (g *GlobalPools) release() { C.gp_release_env(g.api, g.env) }

// useGlobalPools makes a session created with opts run on the environment's
// global pools instead of creating its own.
func (g *GlobalPools) UseGlobalPools(opts *ort.SessionOptions) error {
	p, err := sessionOptionsPointer(opts)
	if err != nil {
		return err
	}
	var errb [512]C.char
	if C.gp_disable_per_session_threads(g.api, p, &errb[0], C.int(len(errb))) != 0 {
		return fmt.Errorf("use the global thread pool: %s", C.GoString(&errb[0]))
	}
	return nil
}

// sessionOptionsPointer returns the OrtSessionOptions* behind the binding's
// SessionOptions, which has no accessor for it. onnxruntime_go v1.27.0 (the
// pinned version) keeps it as the struct's one field; the layout is checked
// before the pointer is read, so a binding whose struct changed gives an
// error here, never a wild pointer.
func sessionOptionsPointer(o *ort.SessionOptions) (unsafe.Pointer, error) {
	t := reflect.TypeFor[ort.SessionOptions]()
	if t.NumField() != 1 || t.Field(0).Type.Kind() != reflect.Pointer || t.Size() != unsafe.Sizeof(uintptr(0)) {
		return nil, fmt.Errorf("thread_pool %q needs the OrtSessionOptions pointer inside onnxruntime_go's SessionOptions, whose layout is not the one this code knows; use thread_pool %q", ThreadPoolGlobal, ThreadPoolSession)
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(o))
	if p == nil {
		return nil, fmt.Errorf("thread_pool %q: session options not created", ThreadPoolGlobal)
	}
	return p, nil
}

// ortAPIIndices lists the OrtApi member indices the C code above uses, by
// member name, for TestOrtAPIIndices.
func ortAPIIndices() map[string]int {
	names := []string{"GetErrorMessage", "ReleaseEnv", "ReleaseStatus",
		"CreateEnvWithGlobalThreadPools", "DisablePerSessionThreads", "CreateThreadingOptions",
		"ReleaseThreadingOptions", "SetGlobalIntraOpNumThreads", "SetGlobalInterOpNumThreads",
		"SetGlobalSpinControl"}
	m := make(map[string]int, len(names))
	for i, n := range names {
		m[n] = int(C.ort_api_index(C.int(i)))
	}
	return m
}
