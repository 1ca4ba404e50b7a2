package infer

import "testing"

func hasNVIDIAGPU() bool { return NVIDIAGPUPresent() }

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
