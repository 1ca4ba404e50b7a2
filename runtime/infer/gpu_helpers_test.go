package infer

import (
	"os"
	"testing"

	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

func hasNVIDIAGPU() bool { return onnxrt.NVIDIAGPUPresent() }

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

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
