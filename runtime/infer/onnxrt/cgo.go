package onnxrt

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// The two entry points of OrtApiBase (onnxruntime_c_api.h); ORT_API_CALL is
// empty on Linux.
typedef struct {
	const void *(*GetApi)(uint32_t version);
	const char *(*GetVersionString)(void);
} probeApiBase;

typedef const probeApiBase *(*probeGetApiBaseFn)(void);

// probe_library opens path, reads the library's version string and asks for
// the API version the binding needs. Codes: 0 ok, 1 dlopen failed, 2 no
// OrtGetApiBase, 3 OrtGetApiBase returned NULL, 4 API version unsupported.
// On success the handle stays open (the binding opens the same file next).
static int probe_library(const char *path, uint32_t api, char *ver, int verlen, char *err, int errlen) {
	ver[0] = 0;
	err[0] = 0;
	void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		strncpy(err, e ? e : "dlopen failed", errlen - 1);
		err[errlen - 1] = 0;
		return 1;
	}
	probeGetApiBaseFn fn = (probeGetApiBaseFn) dlsym(h, "OrtGetApiBase");
	if (!fn) {
		dlclose(h);
		return 2;
	}
	const probeApiBase *base = fn();
	if (!base) {
		dlclose(h);
		return 3;
	}
	const char *v = base->GetVersionString ? base->GetVersionString() : NULL;
	if (v) {
		strncpy(ver, v, verlen - 1);
		ver[verlen - 1] = 0;
	}
	if (!base->GetApi || !base->GetApi(api)) {
		dlclose(h);
		return 4;
	}
	return 0;
}

// A saved copy of every signal disposition. Execution providers (CUDA,
// TensorRT) install their own handlers when they initialize, replacing the
// Go runtime's (onnxruntime_go issue #140); restoring the saved copies puts
// Go's back.
#define SAVED_SIGNALS 65
typedef struct {
	struct sigaction act[SAVED_SIGNALS];
	int ok[SAVED_SIGNALS];
} savedSignals;

static savedSignals *save_signals(void) {
	savedSignals *s = calloc(1, sizeof(savedSignals));
	if (!s) return NULL;
	for (int i = 1; i < SAVED_SIGNALS; i++) {
		if (i == SIGKILL || i == SIGSTOP) continue;
		s->ok[i] = sigaction(i, NULL, &s->act[i]) == 0;
	}
	return s;
}

// restore_signals reinstates the saved dispositions, frees s and returns
// how many had been changed in between.
static int restore_signals(savedSignals *s) {
	int changed = 0;
	for (int i = 1; i < SAVED_SIGNALS; i++) {
		if (!s->ok[i]) continue;
		struct sigaction now;
		if (sigaction(i, NULL, &now) == 0 && now.sa_handler != s->act[i].sa_handler) changed++;
		sigaction(i, &s->act[i], NULL);
	}
	free(s);
	return changed;
}

// ignore_signal_from_c replaces a handler behind Go's back, as a provider
// would; tests use it to prove restore_signals.
static void ignore_signal_from_c(int sig) {
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_IGN;
	sigaction(sig, &sa, NULL);
}
*/
import "C"

import (
	"unsafe"
)

// probeResult is what probeLibrary learned about a shared library.
type probeResult int

const (
	probeOK probeResult = iota
	probeOpenFailed
	probeNotORT
	probeNoBase
	probeAPIUnsupported
)

// probeLibrary opens the library at path and reports its ONNX Runtime version
// and whether it serves API version api.
func probeLibrary(path string, api uint32) (res probeResult, version, dlerr string) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var ver, errb [256]C.char
	code := C.probe_library(cpath, C.uint32_t(api), &ver[0], C.int(len(ver)), &errb[0], C.int(len(errb)))
	return probeResult(code), C.GoString(&ver[0]), C.GoString(&errb[0])
}

// WithSignalsPreserved runs fn and then restores every signal disposition
// that was in place before it, returning how many fn had changed.
func WithSignalsPreserved(fn func()) (changed int) {
	saved := C.save_signals()
	defer func() {
		if saved != nil {
			changed = int(C.restore_signals(saved))
		}
	}()
	fn()
	return 0
}

// ignoreSignalFromC sets sig to SIG_IGN with sigaction directly, bypassing
// the Go runtime, the way a native library would.
func ignoreSignalFromC(sig int) { C.ignore_signal_from_c(C.int(sig)) }
