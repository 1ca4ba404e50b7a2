package onnxrt

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>

typedef int (*cuInitFn)(unsigned int);
typedef int (*cuDeviceGetCountFn)(int *);

// gpu_driver_devices returns the CUDA driver's device count, or -1 when
// libcuda.so.1 is not installed or cuInit fails (no device, no driver).
static int gpu_driver_devices(void) {
	void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (!h) return -1;
	cuInitFn init = (cuInitFn) dlsym(h, "cuInit");
	cuDeviceGetCountFn count = (cuDeviceGetCountFn) dlsym(h, "cuDeviceGetCount");
	int n = -1;
	if (init && count && init(0) == 0 && count(&n) != 0) n = -1;
	return n;
}
*/
import "C"

// cudaDriverDevices asks the CUDA driver how many devices it has (-1: no
// driver, or cuInit failed).
func cudaDriverDevices() int { return int(C.gpu_driver_devices()) }
