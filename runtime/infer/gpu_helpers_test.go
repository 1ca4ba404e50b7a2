package infer

import (
	"os"
	"path/filepath"
	"testing"
)

// hasNVIDIAGPU reports whether the machine has an NVIDIA GPU with its
// driver loaded (the device node the CUDA runtime opens).
func hasNVIDIAGPU() bool {
	gpus, _ := filepath.Glob("/proc/driver/nvidia/gpus/*")
	if len(gpus) > 0 {
		return true
	}
	_, err := os.Stat("/dev/nvidia0")
	return err == nil
}

// requireGPU skips a GPU test on a machine without an NVIDIA GPU.
func requireGPU(t testing.TB) {
	t.Helper()
	if !hasNVIDIAGPU() {
		t.Skip("no NVIDIA GPU")
	}
}

// skipWithGPU skips a CPU test that asserts a GPU provider cannot run:
// on a machine with an NVIDIA GPU it could.
func skipWithGPU(t testing.TB) {
	t.Helper()
	if hasNVIDIAGPU() {
		t.Skip("an NVIDIA GPU is present: this CPU test asserts that the GPU providers fall back")
	}
}
