package onnxrt

import (
	"os"
	"path/filepath"
)

// NVIDIAGPUPresent reports whether the machine has an NVIDIA GPU with its
// driver loaded (the kernel driver's per-GPU entries, or the device node
// the CUDA runtime opens). Tests use it to skip GPU tests ("no NVIDIA
// GPU") and CPU tests that assert the GPU providers cannot run.
func NVIDIAGPUPresent() bool {
	if gpus, _ := filepath.Glob("/proc/driver/nvidia/gpus/*"); len(gpus) > 0 {
		return true
	}
	_, err := os.Stat("/dev/nvidia0")
	return err == nil
}
