package onnxrt

import (
	"bytes"
	"io/fs"
	"os"
)

// NVIDIAGPUPresent reports whether the machine has an NVIDIA GPU with its
// driver loaded. Tests use it to skip GPU tests ("no NVIDIA GPU") and CPU
// tests that assert the GPU providers cannot run. It asks, in order:
//   - a discrete GPU's kernel driver: /proc/driver/nvidia/gpus/* or the
//     device node /dev/nvidia0 the CUDA runtime opens;
//   - a Jetson (Tegra: integrated GPU, no /dev/nvidia0): the nvhost
//     device nodes (/dev/nvhost-ctrl-gpu, /dev/nvhost-gpu, ...) or a
//     device tree whose compatible list holds "nvidia,tegra...";
//   - the CUDA driver itself (libcuda.so.1: cuInit, cuDeviceGetCount),
//     when it is installed: a GPU the driver counts is one.
func NVIDIAGPUPresent() bool {
	return gpuPresent(os.DirFS("/"), cudaDriverDevices)
}

// gpuPresent is NVIDIAGPUPresent over the file system root (a fake one
// in tests) and the CUDA driver's answer (nil: not asked).
func gpuPresent(root fs.FS, driverDevices func() int) bool {
	for _, pattern := range []string{"proc/driver/nvidia/gpus/*", "dev/nvidia0", "dev/nvhost-*"} {
		if m, _ := fs.Glob(root, pattern); len(m) > 0 {
			return true
		}
	}
	// The device tree's compatible property: NUL-separated strings such
	// as "nvidia,p3768-0000+p3767-0000\x00nvidia,tegra234\x00".
	if b, err := fs.ReadFile(root, "proc/device-tree/compatible"); err == nil && len(b) <= 4096 {
		for _, c := range bytes.Split(b, []byte{0}) {
			if bytes.HasPrefix(c, []byte("nvidia,tegra")) {
				return true
			}
		}
	}
	return driverDevices != nil && driverDevices() > 0
}
