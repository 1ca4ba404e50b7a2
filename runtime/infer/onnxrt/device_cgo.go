package onnxrt

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// OrtApi member indices of the device-resident path (device.go), all of
// ORT_API_VERSION 24 or older: TestDeviceAPIIndices checks each against
// the binding's header (and the 1.29.0 header when it is here).
enum {
	devGetErrorMessage = 2,
	devCreateRunOptions = 39,
	devRunOptionsSetTerminate = 46,
	devCreateTensorAsOrtValue = 48,
	devCreateTensorWithDataAsOrtValue = 49,
	devGetTensorMutableData = 51,
	devCreateMemoryInfo = 68,
	devReleaseStatus = 93,
	devReleaseMemoryInfo = 94,
	devReleaseValue = 96,
	devReleaseRunOptions = 97,
	devCreateAllocator = 131,
	devReleaseAllocator = 132,
	devRunWithBinding = 133,
	devCreateIoBinding = 134,
	devReleaseIoBinding = 135,
	devBindInput = 136,
	devBindOutput = 137,
};

static int dev_api_index(int i) {
	static const int idx[] = {devGetErrorMessage, devCreateRunOptions, devRunOptionsSetTerminate,
		devCreateTensorAsOrtValue, devCreateTensorWithDataAsOrtValue, devGetTensorMutableData,
		devCreateMemoryInfo, devReleaseStatus, devReleaseMemoryInfo, devReleaseValue, devReleaseRunOptions,
		devCreateAllocator, devReleaseAllocator, devRunWithBinding, devCreateIoBinding, devReleaseIoBinding,
		devBindInput, devBindOutput};
	return (i >= 0 && i < (int)(sizeof idx / sizeof idx[0])) ? idx[i] : -1;
}

// The signatures, as onnxruntime_c_api.h declares them (ORT_API_CALL is
// empty on Linux; OrtStatus* is NULL on success).
typedef const char *(*devErrMsgFn)(const void *status);
typedef void (*devReleaseFn)(void *);
typedef void *(*devCreateRunOptionsFn)(void **out);
typedef void *(*devSetTerminateFn)(void *run_options);
typedef void *(*devCreateTensorFn)(void *allocator, const int64_t *shape, size_t rank, int type, void **out);
typedef void *(*devCreateTensorWithDataFn)(const void *info, void *data, size_t bytes, const int64_t *shape, size_t rank, int type, void **out);
typedef void *(*devMutableDataFn)(void *value, void **out);
typedef void *(*devCreateMemoryInfoFn)(const char *name, int alloc_type, int id, int mem_type, void **out);
typedef void *(*devCreateAllocatorFn)(const void *session, const void *info, void **out);
typedef void *(*devRunWithBindingFn)(void *session, const void *run_options, const void *binding);
typedef void *(*devCreateIoBindingFn)(void *session, void **out);
typedef void *(*devBindFn)(void *binding, const char *name, const void *value);

static int dev_status(void *const *a, void *st, char *err, int errlen) {
	if (!st) return 0;
	const char *m = ((devErrMsgFn) a[devGetErrorMessage])(st);
	strncpy(err, m ? m : "unknown ONNX Runtime error", errlen - 1);
	err[errlen - 1] = 0;
	((devReleaseFn) a[devReleaseStatus])(st);
	return 1;
}

#define DEV_A void *const *a = (void *const *) api; err[0] = 0

// OrtMemoryInfo of name ("Cpu" or "Cuda"), OrtDeviceAllocator, OrtMemTypeDefault.
static int dev_memory_info(const void *api, const char *name, int device, void **out, char *err, int errlen) {
	DEV_A;
	return dev_status(a, ((devCreateMemoryInfoFn) a[devCreateMemoryInfo])(name, 0, device, 0, out), err, errlen);
}

static int dev_allocator(const void *api, const void *session, const void *info, void **out, char *err, int errlen) {
	DEV_A;
	return dev_status(a, ((devCreateAllocatorFn) a[devCreateAllocator])(session, info, out), err, errlen);
}

// dev_tensor allocates a float tensor with the allocator and returns its data pointer.
static int dev_tensor(const void *api, void *alloc, const int64_t *shape, size_t rank, void **out, void **data, char *err, int errlen) {
	DEV_A;
	if (dev_status(a, ((devCreateTensorFn) a[devCreateTensorAsOrtValue])(alloc, shape, rank, 1, out), err, errlen)) return 1;
	if (dev_status(a, ((devMutableDataFn) a[devGetTensorMutableData])(*out, data), err, errlen)) {
		((devReleaseFn) a[devReleaseValue])(*out);
		*out = NULL;
		return 1;
	}
	return 0;
}

// dev_view is a float tensor over memory the caller owns (the memory info says where it is).
static int dev_view(const void *api, const void *info, void *data, const int64_t *shape, size_t rank, void **out, char *err, int errlen) {
	DEV_A;
	size_t n = 1;
	for (size_t i = 0; i < rank; i++) n *= (size_t) shape[i];
	return dev_status(a, ((devCreateTensorWithDataFn) a[devCreateTensorWithDataAsOrtValue])(info, data, n * sizeof(float), shape, rank, 1, out), err, errlen);
}

static int dev_binding(const void *api, void *session, void **out, char *err, int errlen) {
	DEV_A;
	return dev_status(a, ((devCreateIoBindingFn) a[devCreateIoBinding])(session, out), err, errlen);
}

static int dev_bind(const void *api, void *binding, const char *name, const void *value, int output, char *err, int errlen) {
	DEV_A;
	return dev_status(a, ((devBindFn) a[output ? devBindOutput : devBindInput])(binding, name, value), err, errlen);
}

// dev_run returns the OrtStatus (NULL: success) for dev_status_message:
// no error buffer on the per-frame path (a Go buffer passed to C escapes
// to the heap).
static void *dev_run(const void *api, void *session, const void *run_options, const void *binding) {
	void *const *a = (void *const *) api;
	return ((devRunWithBindingFn) a[devRunWithBinding])(session, run_options, binding);
}

static void dev_status_message(const void *api, void *st, char *err, int errlen) {
	dev_status((void *const *) api, st, err, errlen);
}

static int dev_terminate_options(const void *api, void **out, char *err, int errlen) {
	DEV_A;
	if (dev_status(a, ((devCreateRunOptionsFn) a[devCreateRunOptions])(out), err, errlen)) return 1;
	if (dev_status(a, ((devSetTerminateFn) a[devRunOptionsSetTerminate])(*out), err, errlen)) {
		((devReleaseFn) a[devReleaseRunOptions])(*out);
		*out = NULL;
		return 1;
	}
	return 0;
}

// What dev_release frees.
enum { devValue = 0, devMemoryInfo = 1, devAllocator = 2, devIoBinding = 3, devRunOptions = 4 };

static void dev_release(const void *api, int kind, void *p) {
	if (!p) return;
	void *const *a = (void *const *) api;
	static const int fn[] = {devReleaseValue, devReleaseMemoryInfo, devReleaseAllocator, devReleaseIoBinding, devReleaseRunOptions};
	((devReleaseFn) a[fn[kind]])(p);
}

// The CUDA runtime's copy, from the libcudart.so.13 the CUDA provider
// loaded into the process, on the sessions' device (cudaSetDevice: the
// current device is per OS thread, and the Go caller locks its thread
// around the call) and on a stream of this API's own:
// cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream) (unified
// addressing tells host from device), then cudaStreamSynchronize(stream).
// ONNX Runtime synchronizes its stream at the end of every run
// (OnRunEnd), so a copy after a run sees the outputs, and the stream's
// synchronization makes a copy before a run done when the run starts.
// Only this stream is waited for: cudaDeviceSynchronize would wait for
// every camera's runs on the device too.
typedef int (*devMemcpyFn)(void *dst, const void *src, size_t bytes, int kind, void *stream);
typedef const char *(*devCudaErrFn)(int);
typedef int (*devStreamSyncFn)(void *stream);
typedef int (*devSetDeviceFn)(int device);
typedef int (*devStreamCreateFn)(void **stream, unsigned int flags);
typedef int (*devStreamDestroyFn)(void *stream);

typedef struct {
	devMemcpyFn memcpy;
	devCudaErrFn err;
	devStreamSyncFn sync;
	devSetDeviceFn set_device;
	devStreamCreateFn stream_create;
	devStreamDestroyFn stream_destroy;
	void *stream;
	void *handle; // the dlopen handle (one reference), dlclose'd by dev_cuda_close
	int device;
} devCuda;

static int dev_cuda_open(devCuda *c, int device, char *err, int errlen) {
	err[0] = 0;
	static const char *names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
	void *h = NULL;
	for (int i = 0; i < 3 && !h; i++) h = dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD);
	for (int i = 0; i < 3 && !h; i++) h = dlopen(names[i], RTLD_LAZY | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		strncpy(err, e ? e : "libcudart not found", errlen - 1);
		err[errlen - 1] = 0;
		return 1;
	}
	c->memcpy = (devMemcpyFn) dlsym(h, "cudaMemcpyAsync");
	c->err = (devCudaErrFn) dlsym(h, "cudaGetErrorString");
	c->sync = (devStreamSyncFn) dlsym(h, "cudaStreamSynchronize");
	c->set_device = (devSetDeviceFn) dlsym(h, "cudaSetDevice");
	c->stream_create = (devStreamCreateFn) dlsym(h, "cudaStreamCreateWithFlags");
	c->stream_destroy = (devStreamDestroyFn) dlsym(h, "cudaStreamDestroy");
	c->handle = h;
	if (!c->memcpy || !c->sync || !c->set_device || !c->stream_create || !c->stream_destroy) {
		strncpy(err, "libcudart lacks cudaMemcpyAsync, cudaStreamSynchronize, cudaSetDevice, cudaStreamCreateWithFlags or cudaStreamDestroy", errlen - 1);
		err[errlen - 1] = 0;
		dlclose(h);
		c->handle = NULL;
		return 1;
	}
	c->device = device;
	// The stream is made on the sessions' device (the caller holds its
	// OS thread); cudaStreamNonBlocking (1): no implicit order with the
	// legacy default stream.
	int rc = c->set_device(device);
	if (!rc) rc = c->stream_create(&c->stream, 1);
	if (rc) {
		const char *m = c->err ? c->err(rc) : NULL;
		snprintf(err, errlen, "cuda stream on device %d: %s (cudaError %d)", device, m ? m : "failed", rc);
		c->stream = NULL;
		dlclose(h);
		c->handle = NULL;
		return 1;
	}
	return 0;
}

// dev_cuda_close destroys the copies' stream on its device (the caller
// holds its OS thread) and drops this API's reference to libcudart. It
// returns the cudaError_t of the destroy (0: success, or no stream).
// Called once per DevAPI, when the models close.
static int dev_cuda_close(devCuda *c) {
	int rc = 0;
	if (c->stream) {
		rc = c->set_device(c->device);
		if (!rc) rc = c->stream_destroy(c->stream);
		c->stream = NULL;
	}
	if (c->handle) {
		dlclose(c->handle);
		c->handle = NULL;
	}
	return rc;
}

// dev_copy copies bytes between host and device memory (cuda) or host
// and host (the CPU test path).
// It returns the cudaError_t (0: success).
static int dev_copy(const devCuda *c, void *dst, const void *src, size_t bytes) {
	if (!c) {
		memcpy(dst, src, bytes);
		return 0;
	}
	// The device is per OS thread: set it on every copy (the Go caller
	// locked its thread for the call), so that device_id > 0 copies on
	// its device whatever the thread did before.
	int rc = c->set_device(c->device);
	if (!rc) rc = c->memcpy(dst, src, bytes, 4, c->stream);
	// An async copy from pageable host memory may return before its DMA
	// is done: wait for this stream (only) before the run reads the
	// tensor, or before the host reads an output.
	return rc ? rc : c->sync(c->stream);
}

static const char *dev_cuda_error(const devCuda *c, int rc) {
	const char *m = c && c->err ? c->err(rc) : NULL;
	return m ? m : "cudaMemcpy failed";
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"
)

// DevAPI is the OrtApi table and, on CUDA, the CUDA runtime's copy.
type DevAPI struct {
	api  unsafe.Pointer
	cuda *C.devCuda // nil: host memory (memcpy)
	// closed: Close ran; a copy after it is refused (the stream is gone,
	// and host memcpy on device pointers would fault).
	closed bool
}

func NewDevAPI(libPath string, cuda bool, device int) (*DevAPI, error) {
	api, err := ortAPI(libPath, requiredAPI)
	if err != nil {
		return nil, err
	}
	d := &DevAPI{api: api}
	if cuda {
		// Go memory without Go pointers (two C function pointers).
		d.cuda = (*C.devCuda)(C.calloc(1, C.sizeof_devCuda)) // holds a C stream pointer: C memory
		var errb [512]C.char
		runtime.LockOSThread()
		rc := C.dev_cuda_open(d.cuda, C.int(device), &errb[0], C.int(len(errb)))
		runtime.UnlockOSThread()
		if rc != 0 {
			C.free(unsafe.Pointer(d.cuda))
			return nil, fmt.Errorf("CUDA runtime for the device copies: %s", C.GoString(&errb[0]))
		}
	}
	return d, nil
}

// Close frees what the API holds outside ONNX Runtime's objects: with
// CUDA the copies' stream (cudaStreamDestroy on its device) and the C
// struct with the library's reference. The models close it after their
// sessions' device tensors; a second Close does nothing.
func (d *DevAPI) Close() error {
	if d == nil || d.closed {
		return nil
	}
	d.closed = true
	if d.cuda == nil {
		return nil
	}
	runtime.LockOSThread()
	rc := C.dev_cuda_close(d.cuda)
	runtime.UnlockOSThread()
	var err error
	if rc != 0 {
		err = fmt.Errorf("cudaStreamDestroy: %s (cudaError %d)", C.GoString(C.dev_cuda_error(d.cuda, rc)), int(rc))
	}
	C.free(unsafe.Pointer(d.cuda))
	d.cuda = nil
	return err
}

// Closed reports whether Close ran.
func (d *DevAPI) Closed() bool { return d.closed }

type errBuf [1024]C.char

func (e *errBuf) err(what string) error {
	return fmt.Errorf("%s: %s", what, C.GoString(&e[0]))
}

func (d *DevAPI) MemoryInfo(name string, device int) (unsafe.Pointer, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var out unsafe.Pointer
	var e errBuf
	if C.dev_memory_info(d.api, cname, C.int(device), &out, &e[0], C.int(len(e))) != 0 {
		return nil, e.err("CreateMemoryInfo " + name)
	}
	return out, nil
}

func (d *DevAPI) Allocator(session, info unsafe.Pointer) (unsafe.Pointer, error) {
	var out unsafe.Pointer
	var e errBuf
	if C.dev_allocator(d.api, session, info, &out, &e[0], C.int(len(e))) != 0 {
		return nil, e.err("CreateAllocator")
	}
	return out, nil
}

// tensor allocates a float32 tensor of shape with alloc: the value and
// its data.
func (d *DevAPI) Tensor(alloc unsafe.Pointer, shape ort.Shape) (value, data unsafe.Pointer, err error) {
	var e errBuf
	if C.dev_tensor(d.api, alloc, (*C.int64_t)(unsafe.Pointer(&shape[0])), C.size_t(len(shape)), &value, &data, &e[0], C.int(len(e))) != 0 {
		return nil, nil, e.err(fmt.Sprintf("allocate tensor %v", shape))
	}
	return value, data, nil
}

// view is a float32 tensor of shape over data, memory that info
// describes (the caller keeps it alive longer than the view).
func (d *DevAPI) View(info, data unsafe.Pointer, shape ort.Shape) (unsafe.Pointer, error) {
	var out unsafe.Pointer
	var e errBuf
	if C.dev_view(d.api, info, data, (*C.int64_t)(unsafe.Pointer(&shape[0])), C.size_t(len(shape)), &out, &e[0], C.int(len(e))) != 0 {
		return nil, e.err(fmt.Sprintf("tensor view %v", shape))
	}
	return out, nil
}

func (d *DevAPI) Binding(session unsafe.Pointer) (unsafe.Pointer, error) {
	var out unsafe.Pointer
	var e errBuf
	if C.dev_binding(d.api, session, &out, &e[0], C.int(len(e))) != 0 {
		return nil, e.err("CreateIoBinding")
	}
	return out, nil
}

func (d *DevAPI) Bind(binding unsafe.Pointer, name string, value unsafe.Pointer, output bool) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	out := C.int(0)
	what := "BindInput"
	if output {
		out, what = 1, "BindOutput"
	}
	var e errBuf
	if C.dev_bind(d.api, binding, cname, value, out, &e[0], C.int(len(e))) != 0 {
		return e.err(what + " " + name)
	}
	return nil
}

func (d *DevAPI) Run(session, runOptions, binding unsafe.Pointer) error {
	st := C.dev_run(d.api, session, runOptions, binding)
	if st == nil {
		return nil
	}
	var e errBuf
	C.dev_status_message(d.api, st, &e[0], C.int(len(e)))
	return errors.New(C.GoString(&e[0]))
}

func (d *DevAPI) TerminateOptions() (unsafe.Pointer, error) {
	var out unsafe.Pointer
	var e errBuf
	if C.dev_terminate_options(d.api, &out, &e[0], C.int(len(e))) != 0 {
		return nil, e.err("run options")
	}
	return out, nil
}

// Kinds of DevAPI.Release.
const (
	RelValue      = C.devValue
	RelMemoryInfo = C.devMemoryInfo
	RelAllocator  = C.devAllocator
	RelIoBinding  = C.devIoBinding
	RelRunOptions = C.devRunOptions
)

func (d *DevAPI) Release(kind C.int, p unsafe.Pointer) { C.dev_release(d.api, kind, p) }

// copy copies n float32 values from src to dst, host and device memory
// in either direction (host to host on the CPU path).
func (d *DevAPI) Copy(dst, src unsafe.Pointer, n int) error {
	if d.closed {
		return errors.New("device copy: the device API is closed")
	}
	if d.cuda != nil {
		// cudaSetDevice holds for the OS thread: keep the goroutine on it
		// from the set to the copy's end.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	if rc := C.dev_copy(d.cuda, dst, src, C.size_t(n*4)); rc != 0 {
		return fmt.Errorf("device copy: %s (cudaError %d)", C.GoString(C.dev_cuda_error(d.cuda, rc)), int(rc))
	}
	return nil
}

// devAPIIndices lists the OrtApi indices above by member name, for
// TestDeviceAPIIndices.
func devAPIIndices() map[string]int {
	names := []string{"GetErrorMessage", "CreateRunOptions", "RunOptionsSetTerminate", "CreateTensorAsOrtValue",
		"CreateTensorWithDataAsOrtValue", "GetTensorMutableData", "CreateMemoryInfo", "ReleaseStatus", "ReleaseMemoryInfo",
		"ReleaseValue", "ReleaseRunOptions", "CreateAllocator", "ReleaseAllocator", "RunWithBinding", "CreateIoBinding",
		"ReleaseIoBinding", "BindInput", "BindOutput"}
	m := make(map[string]int, len(names))
	for i, n := range names {
		m[n] = int(C.dev_api_index(C.int(i)))
	}
	return m
}
